//! What one client looks at: the camera, the instant of the scene's clock
//! (playing or paused), the integrator, the structure and the sample
//! budget; and how each request changes it.

use super::orbit::{self, CameraWire};
use super::protocol::{Request, SettingsChange};
use crate::parse::AccelArg;
use crate::render::IntegratorName;
use caustic_scene::{Camera, Timeline};
use std::time::Instant;

/// One client's view.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewState {
    /// The client's camera; `None` follows the scene's own camera (along
    /// its path, in an animated scene).
    pub camera: Option<Camera>,
    pub playhead: Playhead,
    pub integrator: IntegratorName,
    /// The structure spec; `None` for the device's default.
    pub accel: Option<AccelArg>,
    /// Samples per pixel (SPPM: passes) after which the image is final.
    pub budget: u32,
}

/// Where the view stands on the scene's clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Playhead {
    /// The instant shown while paused, or at `since` while playing.
    time: f32,
    since: Option<Instant>,
}

impl Playhead {
    pub fn paused_at(time: f32) -> Self {
        Self { time, since: None }
    }

    pub fn playing(&self) -> bool {
        self.since.is_some()
    }

    /// The instant to show at `now`: while playing the clock runs in real
    /// time and starts over after its end.
    pub fn time(&self, clock: Option<&Timeline>, now: Instant) -> f32 {
        let Some(clock) = clock else {
            return 0.0;
        };
        let Some(since) = self.since else {
            return self.time;
        };
        let duration = clock.duration();
        if duration <= 0.0 {
            return clock.start;
        }
        let t = self.time + now.saturating_duration_since(since).as_secs_f32();
        clock.start + (t - clock.start).rem_euclid(duration)
    }

    fn play(&mut self, now: Instant) {
        if self.since.is_none() {
            self.since = Some(now);
        }
    }

    fn pause(&mut self, clock: &Timeline, now: Instant) {
        self.time = self.time(Some(clock), now);
        self.since = None;
    }

    fn seek(&mut self, time: f32, clock: &Timeline, now: Instant) {
        self.time = time.clamp(clock.start, clock.end);
        if self.since.is_some() {
            self.since = Some(now);
        }
    }
}

/// What a request is applied against.
pub struct Surroundings<'a> {
    /// The camera of the scene as posed now: what a camera move starts
    /// from while the view follows the scene.
    pub scene_camera: Camera,
    /// Width over height of the image.
    pub aspect: f32,
    pub clock: Option<&'a Timeline>,
    pub now: Instant,
}

impl ViewState {
    /// Applies `request`. A refused request (a camera move that leaves no
    /// view direction, a clock request for a still scene) is an error
    /// for the client and leaves the view as it was.
    pub fn apply(&mut self, request: Request, around: &Surroundings) -> Result<(), String> {
        let camera = self.camera.unwrap_or(around.scene_camera);
        match request {
            Request::Orbit { yaw, pitch } => self.place(orbit::orbit(&camera, yaw, pitch)),
            Request::Pan { right, up } => self.place(orbit::pan(&camera, right, up, around.aspect)),
            Request::Zoom { factor } => self.place(orbit::zoom(&camera, factor)),
            Request::Camera(wire) => self.place(CameraWire::to_camera(wire)),
            Request::ResetCamera => {
                self.camera = None;
                Ok(())
            }
            Request::Play => self.with_clock(around, |head, _| head.play(around.now)),
            Request::Pause => self.with_clock(around, |head, clock| head.pause(clock, around.now)),
            Request::Seek { time } => {
                self.with_clock(around, |head, clock| head.seek(time, clock, around.now))
            }
            Request::Settings(change) => {
                self.settle(change);
                Ok(())
            }
        }
    }

    /// Takes `camera` as the client's, if it has a view direction.
    fn place(&mut self, camera: Camera) -> Result<(), String> {
        if !crate::camera::usable(&camera) {
            return Err(
                "camera move refused: it would leave the camera without a view direction".into(),
            );
        }
        self.camera = Some(camera);
        Ok(())
    }

    fn with_clock(
        &mut self,
        around: &Surroundings,
        change: impl FnOnce(&mut Playhead, &Timeline),
    ) -> Result<(), String> {
        let Some(clock) = around.clock else {
            return Err("the scene is not animated: it has no clock to play or seek".into());
        };
        change(&mut self.playhead, clock);
        Ok(())
    }

    fn settle(&mut self, change: SettingsChange) {
        if let Some(integrator) = change.integrator {
            self.integrator = integrator;
        }
        if let Some(accel) = change.accel {
            self.accel = accel;
        }
        if let Some(budget) = change.budget {
            self.budget = budget;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caustic_geom::Vec3;
    use std::time::Duration;

    fn view() -> ViewState {
        ViewState {
            camera: None,
            playhead: Playhead::paused_at(0.0),
            integrator: IntegratorName::Whitted,
            accel: None,
            budget: 16,
        }
    }

    fn around(clock: Option<&Timeline>, now: Instant) -> Surroundings<'_> {
        Surroundings {
            scene_camera: Camera::look_at(Vec3::Z * 3.0, Vec3::ZERO, Vec3::Y, 45.0),
            aspect: 1.5,
            clock,
            now,
        }
    }

    #[test]
    fn camera_requests_start_from_the_scene_camera_and_reset_to_it() {
        let now = Instant::now();
        let mut state = view();
        state
            .apply(Request::Zoom { factor: 2.0 }, &around(None, now))
            .unwrap();
        assert_eq!(state.camera.map(|c| c.eye), Some(Vec3::Z * 6.0));
        state
            .apply(Request::ResetCamera, &around(None, now))
            .unwrap();
        assert_eq!(state.camera, None);
        // A request the camera cannot take changes nothing.
        let up = CameraWire {
            eye: [0.0, 3.0, 0.0],
            target: [0.0; 3],
            up: [0.0, 1.0, 0.0],
            fov: 40.0,
        };
        let before = state.clone();
        assert!(
            state
                .apply(Request::Camera(up), &around(None, now))
                .is_err()
        );
        assert_eq!(state, before);
    }

    #[test]
    fn the_playhead_runs_loops_pauses_and_seeks() {
        let clock = Timeline {
            start: 0.0,
            end: 4.0,
            frames: 121,
        };
        let start = Instant::now();
        let mut state = view();
        let at = |s: f32| start + Duration::from_secs_f32(s);
        assert!(state.apply(Request::Play, &around(None, start)).is_err());
        state
            .apply(Request::Play, &around(Some(&clock), start))
            .unwrap();
        assert!(state.playhead.playing());
        assert_eq!(state.playhead.time(Some(&clock), at(1.5)), 1.5);
        assert_eq!(state.playhead.time(Some(&clock), at(5.0)), 1.0);
        state
            .apply(Request::Pause, &around(Some(&clock), at(2.0)))
            .unwrap();
        assert_eq!(state.playhead.time(Some(&clock), at(9.0)), 2.0);
        state
            .apply(Request::Seek { time: 7.0 }, &around(Some(&clock), at(9.0)))
            .unwrap();
        assert_eq!(state.playhead.time(Some(&clock), at(9.0)), 4.0);
    }

    #[test]
    fn settings_change_only_what_they_name() {
        let mut state = view();
        let change = SettingsChange {
            budget: Some(3),
            ..Default::default()
        };
        let now = Instant::now();
        state
            .apply(Request::Settings(change), &around(None, now))
            .unwrap();
        assert_eq!(
            (state.budget, state.integrator),
            (3, IntegratorName::Whitted)
        );
    }
}
