//! An animation's images written beside its rendering: a few threads of
//! their own encode and write the frames while the devices go on with the
//! next ones. A 1080p EXR takes one thread about 0.1 s to encode, more than
//! a GPU takes to render a photon-mapped frame, so frames written in turn
//! by the render loop would bound the frame rate by the encoder's speed.
//!
//! The queue is bounded (a frame waits for a free writer once as many
//! frames as writers are queued), so memory stays at a few frames; the
//! first failure (a full disk, a folder that went away) is kept and given
//! back by the next [`FrameWriter::write`] and by [`FrameWriter::finish`],
//! naming the file.

use anyhow::{Context, Result, anyhow};
use caustic::Film;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Bytes of finished frames the writers may hold at once (queued or being
/// encoded): the writer count shrinks for large frames to stay below it.
const HELD_BYTES: usize = 2 << 30;

/// Most writers: a 1080p EXR takes one thread about 0.1 s to encode, so 32
/// writers keep up with 300 frames a second (four GPUs' photon-mapped
/// frames at 1080p come at about 200).
const MOST_WRITERS: usize = 32;

/// One image to write.
struct Job {
    film: Film,
    path: PathBuf,
    exposure: f32,
}

/// Writer threads fed through a bounded queue.
pub(crate) struct FrameWriter {
    queue: Option<SyncSender<Job>>,
    threads: Vec<JoinHandle<()>>,
    failure: Arc<Mutex<Option<anyhow::Error>>>,
}

impl FrameWriter {
    /// Writers for frames of `pixels` pixels, as many as half the render's
    /// worker threads (`workers`; a GPU's frame leaves the cores mostly
    /// idle, a CPU's frame takes far longer than its write) within
    /// [`MOST_WRITERS`] and the memory bound [`HELD_BYTES`], at least one.
    pub(crate) fn for_frames(pixels: usize, workers: usize) -> Self {
        Self::new(writer_count(pixels, workers))
    }

    /// `writers` threads (at least one).
    pub(crate) fn new(writers: usize) -> Self {
        let writers = writers.max(1);
        let (queue, jobs) = sync_channel::<Job>(writers);
        let jobs = Arc::new(Mutex::new(jobs));
        let failure = Arc::new(Mutex::new(None));
        let threads = (0..writers)
            .map(|_| {
                let jobs = Arc::clone(&jobs);
                let failure = Arc::clone(&failure);
                std::thread::spawn(move || write_until_closed(&jobs, &failure))
            })
            .collect();
        Self {
            queue: Some(queue),
            threads,
            failure,
        }
    }

    /// Queues `film` for `path` (waits while the queue is full). Fails with
    /// an earlier write's error, if one failed.
    pub(crate) fn write(&self, film: Film, path: PathBuf, exposure: f32) -> Result<()> {
        self.earlier_failure()?;
        let queue = self.queue.as_ref().context("the frame writer is closed")?;
        queue
            .send(Job {
                film,
                path,
                exposure,
            })
            .map_err(|_| anyhow!("the frame writers stopped"))
    }

    /// Waits until every queued frame is written; the first failure, if any.
    pub(crate) fn finish(mut self) -> Result<()> {
        if let Some(panic) = self.close() {
            std::panic::resume_unwind(panic);
        }
        self.earlier_failure()
    }

    /// Closes the queue and waits for the writers to write what it holds;
    /// a writer's panic, if one panicked.
    fn close(&mut self) -> Option<Box<dyn std::any::Any + Send>> {
        drop(self.queue.take());
        let joined: Vec<_> = self.threads.drain(..).map(JoinHandle::join).collect();
        joined.into_iter().find_map(Result::err)
    }

    fn earlier_failure(&self) -> Result<()> {
        match self
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl Drop for FrameWriter {
    /// A writer dropped without [`FrameWriter::finish`] (an error ended the
    /// render) still writes what was queued before the process goes on.
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// The writers for frames of `pixels` pixels beside `workers` render
/// threads.
fn writer_count(pixels: usize, workers: usize) -> usize {
    // A frame held by a writer, one queued behind it.
    let frame_bytes = pixels.max(1) * size_of::<caustic::Rgb>() * 2;
    (workers / 2)
        .min(MOST_WRITERS)
        .min(HELD_BYTES / frame_bytes)
        .max(1)
}

/// One writer: takes jobs until the queue is closed and empty; keeps the
/// first failure (later ones would repeat its cause).
fn write_until_closed(jobs: &Mutex<Receiver<Job>>, failure: &Mutex<Option<anyhow::Error>>) {
    loop {
        let next = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(job) = next else { return };
        let written =
            caustic::image_io::write_image_on_this_thread(&job.film, &job.path, job.exposure)
                .with_context(|| format!("cannot write {}", job.path.display()));
        if let Err(error) = written {
            failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn film(width: u32, height: u32, value: f32) -> Film {
        Film {
            width,
            height,
            pixels: (0..width * height)
                .map(|i| caustic::Rgb::new(value, i as f32, 0.5))
                .collect(),
        }
    }

    #[test]
    fn every_queued_frame_is_written_as_the_film_was() {
        let dir = std::env::temp_dir().join(format!("caustic-frame-writer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let writer = FrameWriter::new(3);
        for k in 0..10 {
            let path = dir.join(format!("f_{k:04}.exr"));
            writer.write(film(7, 5, k as f32), path, 0.0).unwrap();
        }
        writer.finish().unwrap();
        for k in 0..10 {
            let back = caustic::image_io::read_exr(&dir.join(format!("f_{k:04}.exr"))).unwrap();
            assert_eq!(back.pixels, film(7, 5, k as f32).pixels, "frame {k}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_is_reported_with_its_path() {
        let missing = std::env::temp_dir()
            .join(format!("caustic-no-such-folder-{}", std::process::id()))
            .join("f_0000.exr");
        let writer = FrameWriter::new(1);
        writer.write(film(2, 2, 1.0), missing.clone(), 0.0).unwrap();
        let error = writer.finish().unwrap_err();
        assert!(
            format!("{error:#}").contains(&missing.display().to_string()),
            "{error:#}"
        );
    }

    #[test]
    fn writers_follow_the_cores_and_the_frame_size() {
        // 1080p beside 64 workers: half of them; never more than 32.
        assert_eq!(writer_count(1920 * 1080, 64), 32);
        assert_eq!(writer_count(1920 * 1080, 32), 16);
        assert_eq!(writer_count(1920 * 1080, 128), 32);
        // Two cores: one writer.
        assert_eq!(writer_count(1920 * 1080, 2), 1);
        // 16K frames (3 GiB a frame held and queued): one writer, not none.
        assert_eq!(writer_count(16384 * 16384, 64), 1);
        // 4K: the memory bound (2 GiB / 2 x 100 MB frames).
        assert_eq!(writer_count(3840 * 2160, 64), 10);
    }
}
