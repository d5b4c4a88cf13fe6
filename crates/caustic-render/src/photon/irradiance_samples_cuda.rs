//! Irradiance samples placed adaptively in screen space, on the device
//! (`irradiance_samples.cu`): the twin of
//! `photon::irradiance_samples::seed` (Zeidan 2011, §6.2.3), which the photon
//! renderer's final gather interpolates between.
//!
//! The shading points are sorted by the Morton code of their pixel, so that
//! every node of the screen-space quadtree is a contiguous run, and the
//! sample budget goes down the tree **level by level** where the CPU
//! recurses: per level, every point adds its moments, then its error term
//! (Zeidan 2011, eq. 6.1) to its child node, and one thread per node splits
//! the node's budget among its four children by largest remainder. A child
//! that gets one sample, is a pixel, or has no more points than samples
//! picks them by jittered selection along its run, with the CPU's random
//! numbers. The sums are 64-bit fixed point added by integer atomics, so
//! the choice does not depend on thread timing; they are exact where the
//! CPU sums in `f32`, so the two choose the same samples except where a
//! share's rounding is a near tie.
//!
//! The host reads two counts per level (the nodes that go on, the nodes
//! that pick; about 11 levels for a 1920×1080 image) and the sample count
//! once, after the picking nodes of all levels are gathered into one
//! selection launch.

use crate::kernels::photon_irradiance_samples as k;
use caustic_gpu::DeviceBuffer;
use caustic_gpu::GpuError;
use caustic_gpu::ops::compact::select_indices;
use caustic_gpu::ops::reduce::max_u32;
use caustic_gpu::ops::scan::{Direction, ScanKind, scan_u32};
use caustic_gpu::ops::segment::gather_u32;
use caustic_gpu::ops::{check_same_len, launch_grid_stride as launch};

/// The points the samples are chosen from, one entry each.
pub struct SeedPoints<'a> {
    pub positions: &'a DeviceBuffer<[f32; 3]>,
    /// Unit shading normals on the viewer's side.
    pub normals: &'a DeviceBuffer<[f32; 3]>,
    /// Pixels packed as `x | y << 16`.
    pub pixels: &'a DeviceBuffer<u32>,
}

/// What to choose: about `count` samples, the error metric's `alpha`
/// (position weight over the scene diagonal), the random seed, and a box
/// holding the points (the fixed-point frame of the position sums).
#[derive(Clone, Copy, Debug)]
pub struct SeedSettings {
    pub count: usize,
    pub alpha: f32,
    pub seed: u64,
    pub bounds: ([f32; 3], [f32; 3]),
}

/// The operation named in length errors.
const OPERATION: &str = "irradiance sample seeding";
/// Fixed-point units of a position coordinate over the box (2^31).
const POSITION_ONE: f64 = 2_147_483_648.0;
/// One node's [`ChildSums`] (kernels/irradiance.cu): eight `u64`.
type ChildSums = [u64; 8];

/// Chooses the samples: indices into the points, each at most once (in no
/// particular order).
pub fn seed(
    points: &SeedPoints<'_>,
    settings: &SeedSettings,
) -> Result<DeviceBuffer<u32>, GpuError> {
    let gpu = points.positions.gpu();
    let n = points.positions.len();
    if n == 0 || settings.count == 0 {
        return DeviceBuffer::uninit(gpu, "irradiance samples", 0);
    }
    check_same_len(OPERATION, "normals", n, points.normals.len())?;
    check_same_len(OPERATION, "pixels", n, points.pixels.len())?;
    let mut keys = DeviceBuffer::<u32>::uninit(gpu, "seed pixel keys", n)?;
    let mut order = DeviceBuffer::<u32>::uninit(gpu, "seed order", n)?;
    let mut sides = DeviceBuffer::<u32>::uninit(gpu, "seed pixel sides", n)?;
    launch(
        gpu,
        k::IRRADIANCE_KEYS,
        n,
        (
            points.pixels.ptr(),
            n as u32,
            keys.ptr_mut(),
            order.ptr_mut(),
            sides.ptr_mut(),
        ),
    )?;
    let levels = 32 - max_u32(&sides)?.leading_zeros();
    drop(sides);
    if n > 1 {
        caustic_gpu::ops::radix_sort::sort_pairs(&mut keys, &mut order)?;
    }
    let tree = Quadtree::new(points, keys, order, settings, levels)?;
    tree.choose()
}

/// The sorted points and the constants every level uses.
struct Quadtree<'a> {
    settings: &'a SeedSettings,
    keys: DeviceBuffer<u32>,
    order: DeviceBuffer<u32>,
    /// Positions in fixed point (`u64` x, y, z and padding), key order.
    fixed: DeviceBuffer<[u64; 4]>,
    /// Normals in key order (w unused).
    normals: DeviceBuffer<[f32; 4]>,
    levels: u32,
    /// `alpha` times the world length of one fixed-point unit.
    alpha_scale: f64,
    /// Fixed-point units of one error term unit.
    error_scale: f64,
}

/// Quadtree nodes: runs `lo .. lo + len` of the sorted points with their
/// budgets and levels (a level's nodes that go on, or the nodes that pick
/// their samples).
struct Nodes {
    lo: DeviceBuffer<u32>,
    len: DeviceBuffer<u32>,
    budget: DeviceBuffer<u32>,
    level: DeviceBuffer<u32>,
}

impl Nodes {
    fn root(quadtree: &Quadtree<'_>) -> Result<Self, GpuError> {
        let gpu = quadtree.keys.gpu();
        let n = quadtree.keys.len() as u32;
        let count = u32::try_from(quadtree.settings.count).unwrap_or(u32::MAX);
        Ok(Self {
            lo: DeviceBuffer::from_slice(gpu, "seed node starts", &[0])?,
            len: DeviceBuffer::from_slice(gpu, "seed node lengths", &[n])?,
            budget: DeviceBuffer::from_slice(gpu, "seed node budgets", &[count])?,
            level: DeviceBuffer::from_slice(gpu, "seed node levels", &[0])?,
        })
    }

    fn uninit(gpu: &caustic_gpu::Gpu, len: usize) -> Result<Self, GpuError> {
        Ok(Self {
            lo: DeviceBuffer::uninit(gpu, "seed node starts", len)?,
            len: DeviceBuffer::uninit(gpu, "seed node lengths", len)?,
            budget: DeviceBuffer::uninit(gpu, "seed node budgets", len)?,
            level: DeviceBuffer::uninit(gpu, "seed node levels", len)?,
        })
    }

    fn len(&self) -> usize {
        self.lo.len()
    }

    /// The entries `indices` of `self`.
    fn select(&self, indices: &DeviceBuffer<u32>) -> Result<Self, GpuError> {
        Ok(Self {
            lo: gather_u32(&self.lo, indices)?,
            len: gather_u32(&self.len, indices)?,
            budget: gather_u32(&self.budget, indices)?,
            level: gather_u32(&self.level, indices)?,
        })
    }

    /// All of `parts`, one after the other.
    fn concat(gpu: &caustic_gpu::Gpu, parts: &[Nodes]) -> Result<Self, GpuError> {
        let mut out = Self::uninit(gpu, parts.iter().map(Nodes::len).sum())?;
        let mut at = 0;
        for part in parts {
            out.lo.copy_from_at(&part.lo, at)?;
            out.len.copy_from_at(&part.len, at)?;
            out.budget.copy_from_at(&part.budget, at)?;
            out.level.copy_from_at(&part.level, at)?;
            at += part.len();
        }
        Ok(out)
    }
}

impl<'a> Quadtree<'a> {
    fn new(
        points: &SeedPoints<'_>,
        keys: DeviceBuffer<u32>,
        order: DeviceBuffer<u32>,
        settings: &'a SeedSettings,
        levels: u32,
    ) -> Result<Self, GpuError> {
        let gpu = keys.gpu();
        let n = keys.len();
        let (lo, hi) = settings.bounds;
        let scale = (0..3)
            .map(|a| hi[a] - lo[a])
            .fold(0.0f32, f32::max)
            .max(f32::MIN_POSITIVE);
        let mut fixed = DeviceBuffer::uninit(gpu, "seed fixed positions", n)?;
        let mut normals = DeviceBuffer::uninit(gpu, "seed sorted normals", n)?;
        launch(
            gpu,
            k::IRRADIANCE_SORTED,
            n,
            (
                points.positions.ptr().cast(),
                points.normals.ptr().cast(),
                order.ptr(),
                n as u32,
                lo[0],
                lo[1],
                lo[2],
                (1.0 / scale),
                fixed.ptr_mut(),
                normals.ptr_mut(),
            ),
        )?;
        let alpha = f64::from(settings.alpha.max(0.0));
        let alpha_scale = alpha * f64::from(scale) / POSITION_ONE;
        // Largest term: alpha times the box's diagonal, plus the bend (2).
        let largest_term = alpha * f64::from(scale) * 3f64.sqrt() + 2.0;
        let error_scale = (2f64.powi(62) / (n as f64 * largest_term)).min(2f64.powi(40));
        Ok(Self {
            settings,
            keys,
            order,
            fixed,
            normals,
            levels,
            alpha_scale,
            error_scale,
        })
    }

    /// Quadtree::distribute from the root, breadth first.
    fn choose(&self) -> Result<DeviceBuffer<u32>, GpuError> {
        let gpu = self.keys.gpu();
        let n = self.keys.len();
        let mut nodes = Nodes::root(self)?;
        if self.settings.count == 1 || self.levels == 0 || n <= self.settings.count {
            return self.select(&nodes);
        }
        let mut picks = Vec::new();
        let mut node_of = DeviceBuffer::<u32>::zeroed(gpu, "seed node of point", n)?;
        for level in 0..self.levels {
            if nodes.len() == 0 {
                break;
            }
            let shift = 2 * (self.levels - level - 1);
            let (children, next, pick) = self.split(&nodes, &node_of, shift, level + 1)?;
            let pick = select_indices(&pick)?;
            if !pick.is_empty() {
                picks.push(children.select(&pick)?);
            }
            let next = select_indices(&next)?;
            self.descend(&next, 4 * nodes.len(), shift, &mut node_of)?;
            nodes = children.select(&next)?;
        }
        self.select(&Nodes::concat(gpu, &picks)?)
    }

    /// Sums the children of `nodes` (moments, then errors) and splits each
    /// node's budget: the children with their runs and budgets, and the
    /// flags of those that go on and those that pick now.
    fn split(
        &self,
        nodes: &Nodes,
        node_of: &DeviceBuffer<u32>,
        shift: u32,
        child_level: u32,
    ) -> Result<(Nodes, DeviceBuffer<u32>, DeviceBuffer<u32>), GpuError> {
        let gpu = self.keys.gpu();
        let n = self.keys.len();
        let slots = 4 * nodes.len();
        let mut sums = DeviceBuffer::<ChildSums>::zeroed(gpu, "seed child sums", slots)?;
        let (keys, fixed, normals) = (self.keys.ptr(), self.fixed.ptr(), self.normals.ptr());
        launch(
            gpu,
            k::IRRADIANCE_MOMENTS,
            n,
            (
                keys,
                fixed,
                normals,
                node_of.ptr(),
                n as u64,
                shift,
                sums.ptr_mut(),
            ),
        )?;
        launch(
            gpu,
            k::IRRADIANCE_ERRORS,
            n,
            (
                keys,
                fixed,
                normals,
                node_of.ptr(),
                n as u64,
                shift,
                self.alpha_scale,
                self.error_scale,
                sums.ptr_mut(),
            ),
        )?;
        let mut children = Nodes::uninit(gpu, slots)?;
        let mut next = DeviceBuffer::<u32>::uninit(gpu, "seed next flags", slots)?;
        let mut pick = DeviceBuffer::<u32>::uninit(gpu, "seed pick flags", slots)?;
        launch(
            gpu,
            k::IRRADIANCE_SPLIT,
            nodes.len(),
            (
                nodes.lo.ptr(),
                nodes.len.ptr(),
                nodes.budget.ptr(),
                nodes.len() as u32,
                sums.ptr(),
                self.error_scale,
                child_level,
                self.levels,
                children.lo.ptr_mut(),
                children.len.ptr_mut(),
                children.budget.ptr_mut(),
                children.level.ptr_mut(),
                next.ptr_mut(),
                pick.ptr_mut(),
            ),
        )?;
        Ok((children, next, pick))
    }

    /// Moves every point still in play to its child's index among the
    /// next level's nodes (`next`: the child slots that go on).
    fn descend(
        &self,
        next: &DeviceBuffer<u32>,
        slots: usize,
        shift: u32,
        node_of: &mut DeviceBuffer<u32>,
    ) -> Result<(), GpuError> {
        let gpu = self.keys.gpu();
        let n = self.keys.len();
        let mut index_of = DeviceBuffer::<u32>::uninit(gpu, "seed slot renumbering", slots)?;
        index_of.fill_bytes(0xff)?;
        launch(
            gpu,
            k::IRRADIANCE_RENUMBER,
            next.len(),
            (next.ptr(), next.len() as u32, index_of.ptr_mut()),
        )?;
        launch(
            gpu,
            k::IRRADIANCE_DESCEND,
            n,
            (
                self.keys.ptr(),
                n as u64,
                shift,
                index_of.ptr(),
                node_of.ptr_mut(),
            ),
        )
    }

    /// The samples of the nodes `picks`, each its budget's worth (or its
    /// every point when fewer) by jittered selection.
    fn select(&self, picks: &Nodes) -> Result<DeviceBuffer<u32>, GpuError> {
        let gpu = self.keys.gpu();
        let m = picks.len();
        let mut takes = DeviceBuffer::<u32>::uninit(gpu, "seed takes", m)?;
        launch(
            gpu,
            k::IRRADIANCE_TAKES,
            m,
            (
                picks.len.ptr(),
                picks.budget.ptr(),
                m as u32,
                takes.ptr_mut(),
            ),
        )?;
        let mut offsets = DeviceBuffer::<u32>::uninit(gpu, "seed offsets", m)?;
        let mut total = DeviceBuffer::<u32>::zeroed(gpu, "seed sample count", 1)?;
        let (exclusive, forward) = (ScanKind::Exclusive, Direction::Forward);
        scan_u32(&takes, &mut offsets, exclusive, forward, Some(&mut total))?;
        let total = total.download()?[0] as usize;
        let mut chosen = DeviceBuffer::<u32>::uninit(gpu, "irradiance samples", total)?;
        launch(
            gpu,
            k::IRRADIANCE_SELECT,
            m,
            (
                self.keys.ptr(),
                self.order.ptr(),
                picks.lo.ptr(),
                picks.len.ptr(),
                picks.budget.ptr(),
                picks.level.ptr(),
                offsets.ptr(),
                m as u32,
                self.settings.seed,
                chosen.ptr_mut(),
            ),
        )?;
        Ok(chosen)
    }
}
