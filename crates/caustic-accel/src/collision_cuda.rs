//! The collision experiment's frames on the device (`collision.cu`): the
//! agents' paths go up once (32 bytes an agent), each frame's segments are
//! made on the device by the counter-based generator of
//! [`segment_direction`](crate::collision::segment_direction), traced by
//! any [`DeviceAccel`] (a BVH of any builder, DACRT, the kd-tree, the
//! grid), and each agent's hits are reduced on the device to its smallest
//! [`nearest_key`](crate::collision::nearest_key): 8 bytes an agent come
//! back, not the rays' hits. The rays and the answers are the CPU's bit
//! for bit ([`Agents::frame_rays`], [`Agents::answers`]).

use crate::bvh::device_accel_cuda::{AccelTracer, DeviceAccel};
use crate::bvh::traverse_cuda::{GpuHit, GpuRay};
use crate::collision::{AgentAnswer, Agents, FrameAnswers};
use crate::kernels::collision as k;
use caustic_gpu::ops::launch_grid_stride;
use caustic_gpu::{DeviceBuffer, Gpu, GpuError};

/// Agents on the device, with room for one frame's rays, hits and answers.
pub struct DeviceAgents {
    agents: Agents,
    /// Per agent `(first position, step)` and `(last position, 0)`.
    paths: DeviceBuffer<[f32; 4]>,
    rays: DeviceBuffer<GpuRay>,
    hits: DeviceBuffer<GpuHit>,
    keys: DeviceBuffer<u64>,
}

impl DeviceAgents {
    /// Uploads the paths of `agents` and makes room for a frame.
    pub fn new(gpu: &Gpu, agents: &Agents) -> Result<Self, GpuError> {
        let segments = agents.count() * agents.rays_per_agent();
        if segments > crate::bvh::traverse_cuda::MAX_RAYS || agents.count() > u32::MAX as usize {
            return Err(GpuError::TooLarge {
                operation: "a collision frame",
                len: segments,
                max: crate::bvh::traverse_cuda::MAX_RAYS,
            });
        }
        let paths: Vec<[f32; 4]> = agents
            .paths()
            .iter()
            .enumerate()
            .flat_map(|(agent, &(a, b))| [a.extend(agents.step(agent)), b.extend(0.0)])
            .map(|v| v.to_array())
            .collect();
        Ok(Self {
            agents: agents.clone(),
            paths: DeviceBuffer::from_slice(gpu, "collision: agent paths", &paths)?,
            rays: DeviceBuffer::uninit(gpu, "collision: segments", segments)?,
            hits: DeviceBuffer::uninit(gpu, "collision: hits", segments)?,
            keys: DeviceBuffer::uninit(gpu, "collision: nearest keys", agents.count())?,
        })
    }

    pub fn agents(&self) -> &Agents {
        &self.agents
    }

    /// Makes the segments of `frame` on the device (without waiting).
    pub fn make_rays(&mut self, frame: usize) -> Result<&DeviceBuffer<GpuRay>, GpuError> {
        let a = &self.agents;
        launch_grid_stride(
            self.paths.gpu(),
            k::COLLISION_RAYS,
            // A warp per agent.
            a.count() * 32,
            (
                self.paths.ptr(),
                a.count() as u32,
                a.rays_per_agent() as u32,
                a.progress(frame),
                a.seed(),
                frame as u32,
                self.rays.ptr_mut(),
            ),
        )?;
        Ok(&self.rays)
    }

    /// One frame: its segments made, traced against `accel` by `tracer`
    /// and reduced per agent, on the device; the answers read back. A
    /// binary BVH traces each agent's segments as a group sharing the
    /// agent's nearest hit as a cutoff
    /// ([`AccelTracer::intersect_group_nearest`]), so the hits of the frame
    /// are then not every segment's closest hit; the answers are the same.
    pub fn frame(
        &mut self,
        accel: &DeviceAccel,
        tracer: &mut AccelTracer,
        frame: usize,
    ) -> Result<FrameAnswers, GpuError> {
        self.make_rays(frame)?;
        let per_agent = self.agents.rays_per_agent();
        if per_agent > 0
            && tracer.intersect_group_nearest(
                accel,
                &self.rays,
                per_agent,
                &mut self.hits,
                &mut self.keys,
            )?
        {
            return self.download_answers();
        }
        if !self.rays.is_empty() {
            tracer.intersect(accel, &self.rays, &mut self.hits)?;
        }
        self.nearest(None)
    }

    /// Each agent's answer from the hits of the last traced frame, or
    /// from `hits` (one per segment) when given.
    pub fn nearest(
        &mut self,
        hits: Option<&DeviceBuffer<GpuHit>>,
    ) -> Result<FrameAnswers, GpuError> {
        let a = &self.agents;
        let hits = hits.unwrap_or(&self.hits);
        if hits.len() != self.rays.len() {
            return Err(GpuError::Invalid {
                what: "collision hits",
                message: format!("{} hits for {} segments", hits.len(), self.rays.len()),
            });
        }
        if a.rays_per_agent() == 0 {
            self.keys.fill_bytes(0xff)?;
        } else {
            launch_grid_stride(
                self.paths.gpu(),
                k::COLLISION_NEAREST,
                a.count() * 32,
                (
                    hits.ptr(),
                    a.count() as u32,
                    a.rays_per_agent() as u32,
                    self.keys.ptr_mut(),
                ),
            )?;
        }
        self.download_answers()
    }

    /// The agents' answers from their keys on the device.
    fn download_answers(&self) -> Result<FrameAnswers, GpuError> {
        Ok(self
            .keys
            .download()?
            .into_iter()
            .map(AgentAnswer::from_key)
            .collect())
    }
}
