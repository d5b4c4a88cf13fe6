//! The view a client asked for, handed from its connection to its render
//! thread. Only the newest view matters (an image of an older camera is
//! wasted work), so this is one slot with a change count, not a queue: the
//! render thread looks at it between passes and sleeps on it when its
//! image is final.

use super::state::ViewState;
use caustic_scene::Camera;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

pub struct Mailbox {
    slot: Mutex<Slot>,
    changed: Condvar,
}

struct Slot {
    view: ViewState,
    /// Requests applied so far.
    generation: u64,
    /// The connection has ended: the render thread should stop.
    closed: bool,
    /// The camera of the scene as the render thread last posed it.
    scene_camera: Camera,
}

/// The view as the render thread takes it.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub generation: u64,
    pub view: ViewState,
}

impl Mailbox {
    pub fn new(view: ViewState, scene_camera: Camera) -> Self {
        Self {
            slot: Mutex::new(Slot {
                view,
                generation: 0,
                closed: false,
                scene_camera,
            }),
            changed: Condvar::new(),
        }
    }

    /// The slot, also after a panic elsewhere: every write leaves it whole.
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies a request through `change`, which sees the view and the
    /// scene's camera; on success the render thread wakes to the new view.
    pub fn change(
        &self,
        change: impl FnOnce(&mut ViewState, Camera) -> Result<(), String>,
    ) -> Result<u64, String> {
        let mut slot = self.lock();
        let scene_camera = slot.scene_camera;
        change(&mut slot.view, scene_camera)?;
        slot.generation += 1;
        self.changed.notify_all();
        Ok(slot.generation)
    }

    /// The view now, or `None` once the connection has ended.
    pub fn snapshot(&self) -> Option<Snapshot> {
        let slot = self.lock();
        (!slot.closed).then(|| Snapshot {
            generation: slot.generation,
            view: slot.view.clone(),
        })
    }

    /// Whether the view has changed since `generation`, or the connection
    /// has ended: the image being made is no longer wanted.
    pub fn stale(&self, generation: u64) -> bool {
        let slot = self.lock();
        slot.closed || slot.generation != generation
    }

    /// Sleeps until the view changes from `generation`, the connection
    /// ends, or `timeout` passes.
    pub fn wait(&self, generation: u64, timeout: Duration) {
        let slot = self.lock();
        let _ = self
            .changed
            .wait_timeout_while(slot, timeout, |slot| {
                !slot.closed && slot.generation == generation
            })
            .unwrap_or_else(PoisonError::into_inner);
    }

    /// Records the scene's camera at the pose being shown.
    pub fn show_scene_camera(&self, camera: Camera) {
        self.lock().scene_camera = camera;
    }

    /// Ends the render thread's work.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::IntegratorName;
    use crate::view::state::Playhead;
    use std::sync::Arc;
    use std::time::Instant;

    fn mailbox() -> Mailbox {
        let view = ViewState {
            camera: None,
            playhead: Playhead::paused_at(0.0),
            integrator: IntegratorName::Whitted,
            accel: None,
            budget: 4,
        };
        Mailbox::new(
            view,
            Camera::look_at(
                caustic_geom::Vec3::Z,
                caustic_geom::Vec3::ZERO,
                caustic_geom::Vec3::Y,
                45.0,
            ),
        )
    }

    #[test]
    fn changes_count_and_wake_the_waiting_thread() {
        let mailbox = Arc::new(mailbox());
        let seen = mailbox.snapshot().unwrap().generation;
        let waiter = {
            let mailbox = Arc::clone(&mailbox);
            std::thread::spawn(move || {
                let start = Instant::now();
                mailbox.wait(seen, Duration::from_secs(30));
                start.elapsed()
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        let generation = mailbox.change(|view, _| {
            view.budget = 9;
            Ok(())
        });
        assert_eq!(generation, Ok(1));
        assert!(waiter.join().unwrap() < Duration::from_secs(30));
        assert!(mailbox.stale(seen) && !mailbox.stale(1));
        // A refused change neither counts nor changes the view.
        assert!(mailbox.change(|_, _| Err("no".into())).is_err());
        assert_eq!(
            mailbox.snapshot().map(|s| (s.generation, s.view.budget)),
            Some((1, 9))
        );
        mailbox.close();
        assert!(mailbox.snapshot().is_none() && mailbox.stale(1));
    }
}
