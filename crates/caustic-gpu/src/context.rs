//! The CUDA device context: a safe probe, the device's facts, one stream, the
//! per-device module cache, and kernel launches.
//!
//! cudarc loads libcuda and libnvrtc at first use and panics when they are
//! missing, so [`Gpu::open`] first asks whether each library can be loaded at
//! all and turns absence into [`GpuError::NoDriver`] or [`GpuError::NoNvrtc`].
//! All work of a handle goes to its one non-blocking stream in issue order,
//! which is why the buffers need no per-allocation events; a second handle
//! on its own stream ([`Gpu::with_own_stream`]) leaves the ordering of what
//! both use to its caller. A handle's stream is made at the middle of the
//! device's stream priorities, so that a second stream can stand above or
//! below it ([`StreamPriority`]).

use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags, CUmemPool_attribute};
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, result, sys};
use cudarc::nvrtc::Ptx;

use crate::compile::{self, ComputeCapability};
use crate::error::{GpuError, describe, human_bytes};
use crate::ipc::IpcExchange;
use crate::kernel::{self, Kernel, Module, Signature};

/// The name of the driver library that cudarc looks for first.
pub const DRIVER_LIBRARY: &str = "libcuda.so";

/// Facts about the device, read once when it is opened.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// Driver ordinal (the N of `cuda:N`).
    pub ordinal: usize,
    pub name: String,
    pub capability: ComputeCapability,
    /// Device memory in bytes.
    pub total_memory: usize,
    pub multiprocessors: u32,
    pub l2_cache_bytes: u32,
    /// CUDA version the driver supports, as (major, minor).
    pub driver_version: (u32, u32),
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (cuda:{}, {}, {} SMs, {}, driver CUDA {}.{})",
            self.name,
            self.ordinal,
            self.capability.arch(),
            self.multiprocessors,
            human_bytes(self.total_memory),
            self.driver_version.0,
            self.driver_version.1
        )
    }
}

/// A device, its stream and its loaded modules. Cheap to clone; every clone
/// shares the stream, so work from clones runs in issue order.
#[derive(Clone)]
pub struct Gpu {
    inner: Arc<Inner>,
}

struct Inner {
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    /// Loaded modules by name; a failed load is kept, so it is reported
    /// again rather than retried at every launch.
    modules: Mutex<HashMap<&'static str, Arc<Result<LoadedModule, GpuError>>>>,
    /// Synchronise after every launch so a fault names its kernel (`CAUSTIC_GPU_SYNC=1`).
    sync_each_launch: bool,
    /// Host nanoseconds spent compiling and loading modules, in total.
    loading_ns: std::sync::atomic::AtomicU64,
    /// The device's side of CUDA IPC exchanges with other processes,
    /// kept for the device's life (see [`Gpu::ipc`]).
    ipc: Mutex<IpcExchange>,
    /// Contexts of the peers whose memory this device's kernels read
    /// directly ([`Gpu::enable_peer_access`] succeeded).
    peers: Mutex<Vec<u64>>,
}

struct LoadedModule {
    /// Indexed like `Module::kernels`.
    functions: Vec<CudaFunction>,
    _module: Arc<CudaModule>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Gpu").field(&self.inner.info).finish()
    }
}

/// Whether the CUDA driver library can be loaded. Never panics.
pub fn driver_available() -> bool {
    // SAFETY: only tries to dlopen the candidate names; loads no symbols.
    unsafe { sys::is_culib_present() }
}

/// Number of CUDA devices; 0 when the driver finds none.
pub fn device_count() -> Result<usize, GpuError> {
    if !driver_available() {
        return Err(GpuError::NoDriver {
            library: DRIVER_LIBRARY,
        });
    }
    guard_panics("counting CUDA devices", || {
        match result::init() {
            Ok(()) => {}
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => return Ok(0),
            Err(e) => return Err(GpuError::driver("initialising the CUDA driver")(e)),
        }
        let count = result::device::get_count().map_err(GpuError::driver("counting devices"))?;
        Ok(count.max(0) as usize)
    })
}

impl Gpu {
    /// Opens device 0. Never panics: a missing driver, NVRTC or device is an error.
    pub fn probe() -> Result<Gpu, GpuError> {
        Gpu::open(0)
    }

    /// Opens device `ordinal`.
    pub fn open(ordinal: usize) -> Result<Gpu, GpuError> {
        let available = device_count()?;
        if ordinal >= available {
            return Err(GpuError::NoDevice { ordinal, available });
        }
        if !compile::nvrtc_available() {
            return Err(GpuError::NoNvrtc {
                library: compile::NVRTC_LIBRARY,
            });
        }
        guard_panics("opening the CUDA device", || Gpu::open_present(ordinal))
    }

    fn open_present(ordinal: usize) -> Result<Gpu, GpuError> {
        let context = CudaContext::new(ordinal).map_err(GpuError::driver("creating a context"))?;
        // SAFETY: every buffer and launch of this crate uses the one stream
        // below, so stream order alone orders all uses of a buffer.
        unsafe { context.disable_event_tracking() };
        context
            .bind_to_thread()
            .map_err(GpuError::driver("making the context current"))?;
        let stream = context
            .new_stream_with_priority(priority_of(StreamPriority::Same)?)
            .map_err(GpuError::driver("creating a stream"))?;
        keep_freed_memory_pooled(&context)?;
        let info = read_info(&context, ordinal)?;
        let sync_each_launch = std::env::var("CAUSTIC_GPU_SYNC").is_ok_and(|v| v == "1");
        Ok(Gpu {
            inner: Arc::new(Inner {
                ipc: Mutex::new(IpcExchange::new(context.clone())),
                context,
                stream,
                info,
                modules: Mutex::default(),
                loading_ns: Default::default(),
                sync_each_launch,
                peers: Mutex::default(),
            }),
        })
    }

    /// Another handle on this device's context with a stream of its own,
    /// so that its work runs beside this handle's (two latency-bound
    /// wavefronts overlapping). Its buffers and modules are its own. A
    /// buffer one handle made and the other's work uses needs the caller's
    /// ordering: the maker's stream synchronised before the other reads
    /// it, and the buffer kept until the other's work on it is done (a
    /// buffer is freed in its maker's stream order).
    ///
    /// The memory pool stops making one stream wait on the other to reuse
    /// a block the other freed (its internal dependencies): a freed block
    /// goes to the other stream only once its free has run, so the two
    /// streams' allocations never order their work.
    pub fn with_own_stream(&self) -> Result<Gpu, GpuError> {
        self.with_own_stream_at(StreamPriority::Same)
    }

    /// [`Gpu::with_own_stream`] with a stream whose blocks the device
    /// starts before (`Above`) or after (`Below`) those of a handle's
    /// first stream when both have blocks waiting for a multiprocessor.
    /// Running blocks are never preempted; a device without stream
    /// priorities treats all three alike.
    pub fn with_own_stream_at(&self, priority: StreamPriority) -> Result<Gpu, GpuError> {
        let inner = &self.inner;
        self.bind()?;
        let stream = inner
            .context
            .new_stream_with_priority(priority_of(priority)?)
            .map_err(GpuError::driver("creating a stream"))?;
        no_pool_dependencies(&inner.context)?;
        let peers = inner
            .peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Ok(Gpu {
            inner: Arc::new(Inner {
                ipc: Mutex::new(IpcExchange::new(inner.context.clone())),
                context: inner.context.clone(),
                stream,
                info: inner.info.clone(),
                modules: Mutex::default(),
                loading_ns: Default::default(),
                sync_each_launch: inner.sync_each_launch,
                peers: Mutex::new(peers),
            }),
        })
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The stream all of this crate's work goes to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// The cudarc context, for work this crate does not wrap.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.context
    }

    /// This device's exportable staging allocation and the other
    /// processes' allocations it has opened (CUDA IPC): kept here, with
    /// the device, because the exchanges that use it recur (every pass of
    /// a render) and both the allocation and the mappings are worth
    /// keeping between them.
    pub fn ipc(&self) -> std::sync::MutexGuard<'_, IpcExchange> {
        // A panic while holding it leaves nothing half-done that a later
        // exchange could misread: every step re-checks its handles.
        self.inner.ipc.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for all queued work; reports a kernel fault that happened in it.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.bind()?;
        let from = std::time::Instant::now();
        let waited = self
            .inner
            .stream
            .synchronize()
            .map_err(GpuError::driver("waiting for the GPU"));
        crate::trace::host_wait(self, "synchronize", from);
        waited
    }

    /// Makes the work queued on this handle's stream from now on wait for
    /// the work queued so far on `other`'s (a handle of the same context),
    /// without waiting on the host: what [`Gpu::with_own_stream`]'s handles
    /// need where one reads what the other wrote.
    pub fn wait_for(&self, other: &Gpu) -> Result<(), GpuError> {
        self.bind()?;
        self.inner
            .stream
            .join(&other.inner.stream)
            .map_err(GpuError::driver("ordering one stream after another"))
    }

    /// (free, total) device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize), GpuError> {
        self.bind()?;
        result::mem_get_info().map_err(GpuError::driver("reading free memory"))
    }

    /// Bytes of buffers allocated and not yet freed, now and at most since
    /// the last [`Gpu::reset_peak_memory`], from the stream-ordered memory
    /// pool that every [`DeviceBuffer`](crate::DeviceBuffer) (and every
    /// primitive's scratch) comes from; `None` on a device without that
    /// pool. A build's peak working memory is the peak after a reset minus
    /// what was in use before.
    pub fn memory_in_use(&self) -> Result<Option<(usize, usize)>, GpuError> {
        if !self.has_async_alloc() {
            return Ok(None);
        }
        let pool = self.default_pool()?;
        let read = |attribute| {
            let mut value = 0u64;
            // SAFETY: the pool is the device's; both attributes are u64s.
            unsafe {
                result::mem_pool::get_attribute(pool, attribute, (&mut value as *mut u64).cast())
            }
            .map_err(GpuError::driver("reading the memory pool's usage"))?;
            Ok::<usize, GpuError>(value as usize)
        };
        Ok(Some((
            read(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            read(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)?,
        )))
    }

    /// Restarts the peak that [`Gpu::memory_in_use`] reports from the
    /// bytes in use now (nothing on a device without the pool).
    pub fn reset_peak_memory(&self) -> Result<(), GpuError> {
        if !self.has_async_alloc() {
            return Ok(());
        }
        let pool = self.default_pool()?;
        let mut zero = 0u64;
        // SAFETY: the pool is the device's; the attribute takes a u64, and
        // setting it to 0 resets the high-water mark.
        unsafe {
            result::mem_pool::set_attribute(
                pool,
                CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                (&mut zero as *mut u64).cast(),
            )
        }
        .map_err(GpuError::driver("resetting the memory pool's peak"))
    }

    fn default_pool(&self) -> Result<sys::CUmemoryPool, GpuError> {
        self.bind()?;
        // SAFETY: the device handle comes from this live context.
        unsafe { result::device::get_default_mem_pool(self.inner.context.cu_device()) }
            .map_err(GpuError::driver("reading the memory pool"))
    }

    /// Compiles (once per process) and loads (once per device) a module.
    /// Launches do this on first use; call it to keep compilation out of a timing.
    pub fn load(&self, module: &'static Module) -> Result<(), GpuError> {
        match self.module(module).as_ref() {
            Ok(_) => Ok(()),
            Err(error) => Err(error.clone()),
        }
    }

    /// Host milliseconds spent so far compiling (NVRTC) and loading (the
    /// driver's JIT) modules on this device: what a first launch of each
    /// module costs, which device-event timings of that launch include.
    pub fn loading_ms(&self) -> f64 {
        let ns = self
            .inner
            .loading_ns
            .load(std::sync::atomic::Ordering::Relaxed);
        ns as f64 / 1e6
    }

    /// Milliseconds of device time that the work `f` queues takes, measured
    /// with two events on the stream.
    pub fn time_ms(&self, f: impl FnOnce() -> Result<(), GpuError>) -> Result<f32, GpuError> {
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let context = &self.inner.context;
        let start = context
            .new_event(flags)
            .map_err(GpuError::driver("creating an event"))?;
        let end = context
            .new_event(flags)
            .map_err(GpuError::driver("creating an event"))?;
        start
            .record(&self.inner.stream)
            .map_err(GpuError::driver("recording an event"))?;
        f()?;
        end.record(&self.inner.stream)
            .map_err(GpuError::driver("recording an event"))?;
        start
            .elapsed_ms(&end)
            .map_err(GpuError::driver("timing with events"))
    }

    /// A [`StageClock`] whose first stage starts with the work queued from now on.
    pub fn stage_clock(&self) -> Result<StageClock, GpuError> {
        let start = self.timing_event()?;
        Ok(StageClock {
            gpu: self.clone(),
            start,
            marks: Vec::new(),
        })
    }

    /// An event recorded on this handle's stream now (stage clocks, the
    /// launch timeline of [`crate::trace`]).
    pub(crate) fn timing_event(&self) -> Result<CudaEvent, GpuError> {
        let event = self
            .inner
            .context
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(GpuError::driver("creating an event"))?;
        event
            .record(&self.inner.stream)
            .map_err(GpuError::driver("recording an event"))?;
        Ok(event)
    }

    /// Lets this device reach `peer`'s memory directly (NVLink or PCIe)
    /// where the pair can, so that copies between them
    /// ([`crate::DeviceBuffer::copy_from_peer`]) skip the host and this
    /// device's kernels may read the peer's buffers
    /// ([`Gpu::reads_directly`]): the contexts' peer access and the
    /// peer's memory pool, both granted. Returns whether it can. Copies
    /// between devices work either way.
    pub fn enable_peer_access(&self, peer: &Gpu) -> Result<bool, GpuError> {
        let (this, other) = (
            self.inner.context.cu_device(),
            peer.inner.context.cu_device(),
        );
        if this == other {
            return Ok(true);
        }
        let mut can = 0;
        // SAFETY: a valid out pointer and two device handles of this driver.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, this, other) }
            .result()
            .map_err(GpuError::driver("asking for peer access"))?;
        if can == 0 {
            return Ok(false);
        }
        self.bind()?;
        // SAFETY: this device's context is current; `peer`'s is live.
        match unsafe { sys::cuCtxEnablePeerAccess(peer.inner.context.cu_ctx(), 0) } {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
            }
            error => {
                return Err(GpuError::driver("enabling peer access")(
                    error.result().unwrap_err(),
                ));
            }
        }
        // The context's peer access does not cover stream-ordered pool
        // allocations (every buffer's, where the device has the pool):
        // without the pool's own grant a copy between two devices'
        // buffers is staged through the host, at a few GB/s instead of
        // NVLink's hundreds.
        if peer.has_async_alloc() {
            let access = sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: this,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            let pool = peer.default_pool()?;
            // SAFETY: the pool is `peer`'s device's; one descriptor.
            let granted = unsafe { sys::cuMemPoolSetAccess(pool, &access, 1) }.result();
            if granted.is_err() {
                // Copies between the two still work (staged by the
                // driver); this device's kernels must not read the peer's
                // buffers, so it is not recorded as reachable.
                return Ok(false);
            }
        }
        let peer_context = peer.inner.context.cu_ctx() as u64;
        let mut peers = self.inner.peers.lock().unwrap_or_else(|e| e.into_inner());
        if !peers.contains(&peer_context) {
            peers.push(peer_context);
        }
        Ok(true)
    }

    /// Whether this device's kernels may read memory of the context
    /// `context` (a [`crate::PeerHandle`]'s) directly: its own, or a
    /// peer's after [`Gpu::enable_peer_access`] succeeded.
    pub fn reads_directly(&self, context: u64) -> bool {
        context == self.inner.context.cu_ctx() as u64
            || self
                .inner
                .peers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&context)
    }

    pub(crate) fn bind(&self) -> Result<(), GpuError> {
        self.inner
            .context
            .bind_to_thread()
            .map_err(GpuError::driver("making the context current"))
    }

    pub(crate) fn has_async_alloc(&self) -> bool {
        self.inner.context.has_async_alloc()
    }

    pub(crate) fn raw_stream(&self) -> sys::CUstream {
        self.inner.stream.cu_stream()
    }

    fn module(&self, module: &'static Module) -> Arc<Result<LoadedModule, GpuError>> {
        if let Some(loaded) = self.inner.modules.lock().unwrap().get(module.name) {
            return loaded.clone();
        }
        // Compile and load outside the lock: modules load in parallel from
        // several threads; the first to finish is kept.
        let start = std::time::Instant::now();
        let loaded = Arc::new(self.load_module(module));
        let spent = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.inner
            .loading_ns
            .fetch_add(spent, std::sync::atomic::Ordering::Relaxed);
        self.inner
            .modules
            .lock()
            .unwrap()
            .entry(module.name)
            .or_insert(loaded)
            .clone()
    }

    fn function<S>(&self, kernel: Kernel<S>) -> Result<CudaFunction, GpuError> {
        match self.module(kernel.module()).as_ref() {
            Ok(module) => Ok(module.functions[kernel.index()].clone()),
            Err(error) => Err(error.clone()),
        }
    }

    fn load_module(&self, module: &'static Module) -> Result<LoadedModule, GpuError> {
        let compiled = compile::compile_cached(module, self.inner.info.capability)?;
        let load_error = |message: String| GpuError::Load {
            module: module.name,
            message,
        };
        let loaded = self
            .inner
            .context
            .load_module(Ptx::from_binary(compiled.cubin.clone()))
            .map_err(|e| load_error(describe(&e)))?;
        let functions = module
            .kernels
            .iter()
            .map(|name| {
                loaded
                    .load_function(name)
                    .map_err(|e| load_error(format!("kernel {name}: {}", describe(&e))))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LoadedModule {
            functions,
            _module: loaded,
        })
    }

    /// How many blocks of `threads` threads of `kernel` fit on one
    /// multiprocessor at once (registers, shared memory, thread slots):
    /// persistent-thread kernels launch exactly that many per SM.
    pub fn resident_blocks<S>(&self, kernel: Kernel<S>, threads: u32) -> Result<u32, GpuError> {
        let function = self.function(kernel)?;
        self.bind()?;
        // SAFETY: the function is loaded in this context, which is current.
        let blocks = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                function.cu_function(),
                threads as i32,
                0,
            )
        }
        .map_err(GpuError::launch(kernel.name()))?;
        Ok(blocks.max(1) as u32)
    }

    /// Queues `kernel` on `blocks` blocks of `threads` threads. The
    /// arguments' types are the kernel's parameter list (see [`Kernel`]).
    pub fn launch<S: Signature>(
        &self,
        kernel: Kernel<S>,
        blocks: u32,
        threads: u32,
        args: S::Args<'_>,
    ) -> Result<(), GpuError> {
        let function = self.function(kernel)?;
        self.bind()?;
        let traced = crate::trace::before_launch(self);
        let mut values = kernel::encode::<S>(args);
        let mut params: Vec<*mut c_void> = values
            .values_mut()
            .iter_mut()
            .map(|v| v.as_param())
            .collect();
        // SAFETY: the function is loaded in this context; `params` points at
        // `values`, which outlive the call (the driver copies them at launch);
        // their number and types are the kernel's parameter list (checked by
        // the type of `kernel`); pointer arguments borrow live buffers, which
        // are freed in stream order, after the kernel has run.
        unsafe {
            result::launch_kernel(
                function.cu_function(),
                (blocks, 1, 1),
                (threads, 1, 1),
                0,
                self.raw_stream(),
                &mut params,
            )
        }
        .map_err(GpuError::launch(kernel.name()))?;
        crate::trace::after_launch(self, kernel.name(), blocks, traced);
        if self.inner.sync_each_launch {
            self.inner
                .stream
                .synchronize()
                .map_err(GpuError::launch(kernel.name()))?;
        }
        Ok(())
    }
}

/// Device time per stage of a multi-stage operation (a BVH build, say),
/// from events recorded on the stream between the stages: marking a stage
/// neither waits for the GPU nor adds work, so the stages run back to back
/// as they would untimed. [`StageClock::finish`] waits and reads the times.
pub struct StageClock {
    gpu: Gpu,
    start: CudaEvent,
    marks: Vec<(&'static str, CudaEvent)>,
}

impl StageClock {
    /// Ends the stage `name` (which began at the previous mark, or at the
    /// clock's start) after the work queued so far.
    pub fn mark(&mut self, name: &'static str) -> Result<(), GpuError> {
        let event = self.gpu.timing_event()?;
        self.marks.push((name, event));
        Ok(())
    }

    /// Waits for the marked work and returns each stage's milliseconds, in
    /// order (a stage marked twice appears twice).
    pub fn finish(self) -> Result<Vec<(&'static str, f32)>, GpuError> {
        let mut previous = &self.start;
        let mut stages = Vec::with_capacity(self.marks.len());
        for (name, event) in &self.marks {
            let ms = previous
                .elapsed_ms(event)
                .map_err(GpuError::driver("timing with events"))?;
            stages.push((*name, ms));
            previous = event;
        }
        Ok(stages)
    }
}

/// Where a stream stands among the streams of one context when their
/// kernels' blocks wait for the same multiprocessors (CUDA stream
/// priorities): the block scheduler starts a higher stream's waiting
/// blocks first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamPriority {
    /// The priority of every handle's first stream.
    Same,
    /// The device's greatest priority, above the first streams.
    Above,
    /// The device's least priority, below the first streams.
    Below,
}

/// The driver's number for `priority` in the current context's range
/// (smaller numbers run first): `Same` is the middle of the range, so
/// that on a device with at least three levels `Above` and `Below` differ
/// from it.
fn priority_of(priority: StreamPriority) -> Result<i32, GpuError> {
    let (least, greatest) = result::stream::get_priority_range()
        .map_err(GpuError::driver("reading the stream priorities"))?;
    Ok(match priority {
        StreamPriority::Same => least + (greatest - least) / 2,
        StreamPriority::Above => greatest,
        StreamPriority::Below => least,
    })
}

/// Freed stream-ordered memory goes back to the OS at every synchronisation
/// by default; keeping it pooled makes the primitives' scratch allocations
/// cheap after the first call.
fn keep_freed_memory_pooled(context: &Arc<CudaContext>) -> Result<(), GpuError> {
    if !context.has_async_alloc() {
        return Ok(());
    }
    let mut threshold = u64::MAX;
    // SAFETY: the device handle comes from a live context; the attribute takes a u64.
    unsafe {
        let pool = result::device::get_default_mem_pool(context.cu_device())
            .map_err(GpuError::driver("reading the memory pool"))?;
        result::mem_pool::set_attribute(
            pool,
            CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
        .map_err(GpuError::driver(
            "setting the memory pool's release threshold",
        ))
    }
}

/// The pool's blocks freed by one stream go to another only once the free
/// has run (opportunistically), never by making the other stream wait:
/// [`Gpu::with_own_stream`]'s streams stay independent.
fn no_pool_dependencies(context: &Arc<CudaContext>) -> Result<(), GpuError> {
    if !context.has_async_alloc() {
        return Ok(());
    }
    let mut allowed: i32 = 0;
    // SAFETY: the device handle comes from a live context; the attribute takes an int.
    unsafe {
        let pool = result::device::get_default_mem_pool(context.cu_device())
            .map_err(GpuError::driver("reading the memory pool"))?;
        result::mem_pool::set_attribute(
            pool,
            CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
            (&mut allowed as *mut i32).cast(),
        )
        .map_err(GpuError::driver(
            "setting the memory pool's reuse across streams",
        ))
    }
}

fn read_info(context: &Arc<CudaContext>, ordinal: usize) -> Result<DeviceInfo, GpuError> {
    let reading = GpuError::driver("reading device attributes");
    let name = context.name().map_err(reading)?;
    let (major, minor) = context.compute_capability().map_err(reading)?;
    let total_memory = context.total_mem().map_err(reading)?;
    let attribute = |a| {
        context
            .attribute(a)
            .map(|v| v.max(0) as u32)
            .map_err(reading)
    };
    let multiprocessors = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let l2_cache_bytes = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
    let mut version = 0;
    // SAFETY: the driver is initialised; the pointer is valid for a write.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(reading)?;
    Ok(DeviceInfo {
        ordinal,
        name,
        capability: ComputeCapability {
            major: major as u32,
            minor: minor as u32,
        },
        total_memory,
        multiprocessors,
        l2_cache_bytes,
        driver_version: ((version / 1000) as u32, (version % 1000 / 10) as u32),
    })
}

/// Runs driver work, turning a panic inside cudarc (a symbol missing from an
/// old driver, say) into an error instead of a crash.
fn guard_panics<T>(
    during: &'static str,
    f: impl FnOnce() -> Result<T, GpuError>,
) -> Result<T, GpuError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        Err(GpuError::Unusable { during, message })
    })
}
