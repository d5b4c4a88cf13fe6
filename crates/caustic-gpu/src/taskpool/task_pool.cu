// task_pool.cu: the task pool's reset before each run (task_pool.rs); the
// runtime itself is task_pool.cuh, which applications' kernels include.
#include "task_pool.cuh"

#define TASK_POOL_RESET_THREADS 256u

// Every header empty at generation 0, the control words zero but the live
// count, which is 1 (the guard that task_pool_run's seeding warp releases),
// and the minimum grab. The warps' counters are zeroed too.
extern "C" __global__ void __launch_bounds__(TASK_POOL_RESET_THREADS)
task_pool_reset(u64* headers, u32 capacity, u32* control, u64* counters, u32 counter_words, u32 min_grab) {
    for (u64 i = global_thread(); i < capacity; i += grid_threads())
        headers[i] = task_pool_header(0, 0u, TASK_POOL_EMPTY);
    for (u64 i = global_thread(); i < counter_words; i += grid_threads()) counters[i] = 0ull;
    if (global_thread() < TASK_POOL_CONTROL_WORDS)
        control[global_thread()] = global_thread() == TASK_POOL_LIVE        ? 1u
                                   : global_thread() == TASK_POOL_MIN_GRAB ? min_grab
                                                                           : 0u;
}
