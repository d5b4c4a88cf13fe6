// task_pool.cuh: a GPU task pool run by persistent warps (Vinkler, Bittner,
// Havran and Hapala, "Massively Parallel Hierarchical Scene Processing with
// Applications in Rendering", CGF 2013, §3). Host side: taskpool/task_pool.rs.
//
// One kernel launch holds as many warps as can be resident. A hierarchical
// algorithm is cut into tasks (a range of items), phases and steps, and a
// step into work chunks of 32 items, one warp each (§3.1). Every warp loops:
// retrieve chunks of some active task, process them, and mark them finished;
// the warp that finishes a step's last chunk advances the task to its next
// step or phase, or finishes it (§3.5). The kernel ends when no task is
// live.
//
// An application is a struct with three warp-wide member functions:
//
//   void seed(TaskPool& pool);                // warp 0 stores the root tasks
//   void process(TaskPool& pool, u32 slot, u32 first, u32 count);
//                                             // chunks first .. first+count
//                                             // of the slot's current step
//   u32 next_step(TaskPool& pool, u32 slot);  // after a step's last chunk:
//                                             // set the next phase/step and
//                                             // return its chunk count; 0
//                                             // skips it, TASK_POOL_DONE ends
//                                             // the task
//
// and its kernel calls task_pool_run(pool, app) (pool from task_pool_attach
// on the kernel's pool parameters). next_step may create tasks
// (task_pool_store_begin / _end) and may turn its own task into a new one
// (the paper reuses a parent's slot for one child) by rewriting the record
// and returning the new task's first chunk count.
//
// ---------------------------------------------------------------- headers
//
// The paper's header is one int per slot: > 0 active with that many
// unclaimed chunks, 0 locked, negative dependent, <= -BIG empty, and
// retrieval subtracts from it with one atomicSub, so several warps may push
// it below zero. Its hazard (§3.10 of our notes): a warp reads slot s as
// active, the task finishes, the slot is reused (dependent, say), and only
// then does the warp's atomicSub land: it corrupts the new task's state.
//
// Here a header is a 64-bit word:
//
//     bits 63..32  count: signed; unclaimed chunks (meaningful when ACTIVE)
//     bits 31..2   generation of the slot, bumped whenever it is locked
//     bits  1..0   kind: EMPTY, LOCKED, DEPENDENT or ACTIVE
//
// Retrieval subtracts N << 32 with one 64-bit atomicAdd, which changes only
// the count bits: the kind and generation bits are never touched by a
// subtraction, and every other transition is an exact store or CAS of the
// whole word. So a stale subtraction is harmless by construction:
//  - on an EMPTY, LOCKED or DEPENDENT word it changes only the count bits,
//    which those kinds ignore (the next transition overwrites them; a
//    storer's CAS on an EMPTY word simply fails and it rescans), and the
//    kind, read from the same atomic's old value, says no chunks were got;
//  - on an ACTIVE word of a newer generation the chunks it got are real
//    chunks of that task (the count was positive): the warp processes them
//    for the task it actually hit. Nothing it uses comes from the scan: the
//    slot, generation and chunk range come from the atomic's old value, and
//    the record is read after the acquire fence that follows it. The
//    generation in the record is checked against the header's (a mismatch
//    is TASK_POOL_ERR_GENERATION, a broken invariant, never expected), and
//    such claims are counted (TASK_POOL_STALE_CLAIMS) to show the case
//    happens and is handled.
// Dependency counts therefore live in the record (pending < 0), not in the
// header: the paper's "increment to 0 activates" is an atomicAdd on it.
//
// Memory order: a record is written, then __threadfence (release), then the
// header is published with atomicExch; a warp that claims chunks with its
// atomicAdd issues __threadfence (acquire) before reading the record, and
// reads records and whatever other warps wrote with __ldcg (L2, coherent).
// Finishing chunks fences before the atomicSub on the unfinished counter,
// and the last finisher fences after it.
//
// Errors never hang: a store that finds no empty slot, or a warp that sees
// no progress anywhere, for longer than the watchdog (globaltimer
// nanoseconds) sets control[TASK_POOL_ERROR] and every warp leaves; the host
// turns the code into a GpuError. Applications report their own failures
// with task_pool_fail(pool, TASK_POOL_ERR_APP, detail).
#pragma once
#include "common.cuh"

// Eq. 1's minimum grab, K: also the step size below which the current warp
// processes a step itself instead of publishing it (§3.8). The grab's floor
// is the pool's (control[TASK_POOL_MIN_GRAB], K unless the host says
// otherwise): with thousands of warps and a few hundred chunks in sight, a
// floor of 14 leaves most warps idle.
#define TASK_POOL_K 14u
#define TASK_POOL_NONE 0xffffffffu
#define TASK_POOL_DONE 0xffffffffu

#define TASK_POOL_EMPTY 0u
#define TASK_POOL_LOCKED 1u
#define TASK_POOL_DEPENDENT 2u
#define TASK_POOL_ACTIVE 3u

// Words of one task record; the first 16 are the runtime's.
#define TASK_POOL_RECORD_WORDS 80u
#define TASK_POOL_PAYLOAD_WORDS 64u

// Control words (u32): what the host reads back.
#define TASK_POOL_LIVE 0u
#define TASK_POOL_ERROR 1u
#define TASK_POOL_ERROR_DETAIL 2u
#define TASK_POOL_PROGRESS 3u
#define TASK_POOL_HIGH_WATER 4u
#define TASK_POOL_STALE_CLAIMS 5u
#define TASK_POOL_STORED 6u
#define TASK_POOL_PEAK_LIVE 7u
#define TASK_POOL_MIN_GRAB 8u
#define TASK_POOL_CONTROL_WORDS 9u

#define TASK_POOL_ERR_POOL_FULL 1u
#define TASK_POOL_ERR_STALLED 2u
#define TASK_POOL_ERR_GENERATION 3u
#define TASK_POOL_ERR_APP 4u

// Per-warp counters (u64): clock64 cycles processing chunks and running
// next_step, cycles retrieving / finishing / storing, cycles finding no
// work; chunks processed.
#define TASK_POOL_WORK 0u
#define TASK_POOL_POOL 1u
#define TASK_POOL_IDLE 2u
#define TASK_POOL_CHUNKS 3u
#define TASK_POOL_COUNTER_WORDS 4u

struct TaskRecord {
    u32 begin, end;    // the task's item range
    u32 phase, step;   // the application's; the runtime never reads them
    u32 chunks;        // chunks of the current step, as created (Eq. 1's N_i)
    int unfinished;    // chunks of the current step not yet finished
    int pending;       // < 0: dependencies not yet finished
    u32 activate[2];   // tasks to notify when this one ends (or NONE)
    u32 generation;    // the header's generation when the task was stored
    u32 reserved[6];
    u32 payload[TASK_POOL_PAYLOAD_WORDS];
};
static_assert(sizeof(TaskRecord) == 4 * TASK_POOL_RECORD_WORDS, "TaskRecord size");

// The pool as one warp sees it (registers), plus its cycle accounting.
struct TaskPool {
    u64* headers;
    TaskRecord* records;
    u32* control;
    u64* counters;
    u32 capacity;
    u32 warps;
    u32 warp;
    u32 min_grab;
    u64 watchdog_ns;
    u64 cycles[3];
    u64 chunks;
    u64 lap_start;
    u32 bucket;
};

// --------------------------------------------------------------- helpers

__device__ __forceinline__ u64 task_pool_header(int count, u32 generation, u32 kind) {
    return ((u64)(u32)count << 32) | ((u64)(generation & 0x3fffffffu) << 2) | (u64)kind;
}
__device__ __forceinline__ u32 task_pool_kind(u64 h) { return (u32)h & 3u; }
__device__ __forceinline__ u32 task_pool_generation(u64 h) { return (u32)h >> 2; }
__device__ __forceinline__ int task_pool_count(u64 h) { return (int)(u32)(h >> 32); }

__device__ __forceinline__ u64 task_pool_now_ns() {
#ifdef __CUDA_ARCH__
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#else
    // The host emulation of caustic-accel's tests (cuda_fibers.h).
    return emu_now_ns();
#endif
}

// Loads what other warps may have written, past the incoherent L1.
__device__ __forceinline__ u32 task_pool_load(const u32* p) { return __ldcg(p); }
__device__ __forceinline__ int task_pool_load(const int* p) { return __ldcg(p); }
__device__ __forceinline__ float task_pool_load(const float* p) { return __ldcg(p); }
__device__ __forceinline__ u64 task_pool_load(const u64* p) { return __ldcg(p); }

// Charges the cycles since the last switch to the current bucket and makes
// `bucket` current (TASK_POOL_WORK, _POOL or _IDLE).
__device__ __forceinline__ void task_pool_charge(TaskPool& pool, u32 bucket) {
    const u64 now = clock64();
    pool.cycles[pool.bucket] += now - pool.lap_start;
    pool.lap_start = now;
    pool.bucket = bucket;
}

__device__ __forceinline__ TaskRecord& task_pool_record(TaskPool& pool, u32 slot) {
    return pool.records[slot];
}

__device__ __forceinline__ u32 task_pool_warp_sum(u32 v) {
    for (u32 d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(CAUSTIC_FULL_MASK, v, d);
    return v;
}

// The lane of the `rank`-th (from 0) set bit of `mask`.
__device__ __forceinline__ u32 task_pool_nth_bit(u32 mask, u32 rank) {
    for (u32 r = 0; r < rank; ++r) mask &= mask - 1u;
    return (u32)(__ffs(mask) - 1);
}

// Records the first error (later ones keep the first) and its detail.
__device__ __forceinline__ void task_pool_fail(TaskPool& pool, u32 code, u32 detail) {
    if (lane_id() == 0 && atomicCAS(pool.control + TASK_POOL_ERROR, 0u, code) == 0u)
        atomicExch(pool.control + TASK_POOL_ERROR_DETAIL, detail);
}

__device__ __forceinline__ bool task_pool_failed(const TaskPool& pool) {
    return task_pool_load(pool.control + TASK_POOL_ERROR) != 0u;
}

__device__ __forceinline__ TaskPool task_pool_attach(u64* headers, u32* records, u32* control, u64* counters,
                                                     u32 capacity, u64 watchdog_ns) {
    TaskPool pool;
    pool.headers = headers;
    pool.records = (TaskRecord*)records;
    pool.control = control;
    pool.counters = counters;
    pool.capacity = capacity;
    pool.warps = gridDim.x * (blockDim.x / 32u);
    pool.warp = blockIdx.x * (blockDim.x / 32u) + warp_id();
    pool.watchdog_ns = watchdog_ns;
    pool.min_grab = max(1u, task_pool_load(control + TASK_POOL_MIN_GRAB));
    pool.cycles[0] = pool.cycles[1] = pool.cycles[2] = 0;
    pool.chunks = 0;
    pool.lap_start = clock64();
    pool.bucket = TASK_POOL_POOL;
    return pool;
}

// Windows of 32 headers that hold every slot ever used.
__device__ __forceinline__ u32 task_pool_windows(const TaskPool& pool) {
    const u32 high = min(pool.capacity, task_pool_load(pool.control + TASK_POOL_HIGH_WATER) + 32u);
    return max(1u, (high + 31u) / 32u);
}

// ---------------------------------------------------------------- storing

// §3.6: finds an empty slot and locks it (bumping its generation); warp-wide.
// TASK_POOL_NONE when none frees up within the watchdog (error POOL_FULL).
// The live count rises here, before the task is visible, so the pool never
// looks finished while a task is being stored.
__device__ u32 task_pool_store_begin(TaskPool& pool) {
    const u32 resume = pool.bucket;
    task_pool_charge(pool, TASK_POOL_POOL);
    u32 window = pool.warp % task_pool_windows(pool);
    u32 scanned = 0;
    u64 since = 0;
    u32 found = TASK_POOL_NONE;
    while (found == TASK_POOL_NONE) {
        if (task_pool_failed(pool)) break;
        const u32 windows = (pool.capacity + 31u) / 32u;
        window %= windows;
        const u32 slot = window * 32u + lane_id();
        const u64 h = slot < pool.capacity ? task_pool_load(pool.headers + slot) : 0ull;
        u32 empty = __ballot_sync(CAUSTIC_FULL_MASK, slot < pool.capacity && task_pool_kind(h) == TASK_POOL_EMPTY);
        while (empty != 0u && found == TASK_POOL_NONE) {
            const u32 leader = (u32)(__ffs(empty) - 1);
            u32 won = 0u;
            if (lane_id() == leader) {
                const u64 locked = task_pool_header(0, task_pool_generation(h) + 1u, TASK_POOL_LOCKED);
                won = atomicCAS(pool.headers + slot, h, locked) == h ? 1u : 0u;
            }
            if (__shfl_sync(CAUSTIC_FULL_MASK, won, leader)) found = window * 32u + leader;
            empty &= empty - 1u;
        }
        ++window;
        if (found != TASK_POOL_NONE) break;
        // A full pass without a slot: wait for one, but not past the watchdog.
        if (++scanned >= windows) {
            scanned = 0;
            const u64 now = task_pool_now_ns();
            if (since == 0) since = now;
            if (now - since > pool.watchdog_ns) task_pool_fail(pool, TASK_POOL_ERR_POOL_FULL, pool.capacity);
            __nanosleep(256);
        }
    }
    if (found != TASK_POOL_NONE && lane_id() == 0) {
        atomicMax(pool.control + TASK_POOL_HIGH_WATER, found + 1u);
        const u32 live = atomicAdd(pool.control + TASK_POOL_LIVE, 1u) + 1u;
        atomicMax(pool.control + TASK_POOL_PEAK_LIVE, live);
        atomicAdd(pool.control + TASK_POOL_STORED, 1u);
    }
    task_pool_charge(pool, resume);
    return found;
}

// Publishes a locked slot whose record the caller has filled (its payload,
// range, phase): `chunks` (>= 1) of its first step, active at once when
// `dependencies` is 0, else dependent on that many tasks that name this slot
// in their `activate` (so a dependant is stored before its activators).
// Warp-wide; lane 0 writes.
__device__ void task_pool_store_end(TaskPool& pool, u32 slot, u32 chunks, u32 dependencies, u32 activate0,
                                    u32 activate1) {
    const u32 resume = pool.bucket;
    task_pool_charge(pool, TASK_POOL_POOL);
    if (lane_id() == 0) {
        TaskRecord& r = pool.records[slot];
        const u32 generation = task_pool_generation(task_pool_load(pool.headers + slot));
        r.chunks = chunks;
        r.unfinished = (int)chunks;
        r.pending = -(int)dependencies;
        r.activate[0] = activate0;
        r.activate[1] = activate1;
        r.generation = generation;
        __threadfence();
        const u64 h = dependencies == 0u ? task_pool_header((int)chunks, generation, TASK_POOL_ACTIVE)
                                         : task_pool_header(0, generation, TASK_POOL_DEPENDENT);
        atomicExch(pool.headers + slot, h);
    }
    __syncwarp();
    task_pool_charge(pool, resume);
}

// ------------------------------------------------------------- retrieving

struct TaskClaim {
    u32 slot;
    u32 first;
    u32 count;
};

// §3.4: lanes read 32 consecutive headers, the warp picks the i-th active
// one (i from its warp id), takes N_w = max(S / W + 1, K) chunks (K: the
// pool's minimum grab) with one
// atomic (Eq. 1) and owns min(old count, N_w) of them. False when nothing
// was got (the window moves on when it holds nothing active).
__device__ bool task_pool_retrieve(TaskPool& pool, u32& window, TaskClaim& claim) {
    window %= task_pool_windows(pool);
    const u32 slot = window * 32u + lane_id();
    const u64 h = slot < pool.capacity ? task_pool_load(pool.headers + slot) : 0ull;
    const bool active = slot < pool.capacity && task_pool_kind(h) == TASK_POOL_ACTIVE && task_pool_count(h) > 0;
    const u32 mask = __ballot_sync(CAUSTIC_FULL_MASK, active);
    if (mask == 0u) {
        ++window;
        return false;
    }
    const u32 created = active ? min(task_pool_load(&pool.records[slot].chunks), 1u << 26) : 0u;
    const u32 visible = task_pool_warp_sum(created);
    const u32 take = max(visible / pool.warps + 1u, pool.min_grab);
    const u32 leader = task_pool_nth_bit(mask, pool.warp % (u32)__popc(mask));
    u64 old = 0;
    if (lane_id() == leader) {
        old = atomicAdd(pool.headers + slot, (u64)(-(long long)take) << 32);
        if (task_pool_kind(old) == TASK_POOL_ACTIVE && task_pool_generation(old) != task_pool_generation(h))
            atomicAdd(pool.control + TASK_POOL_STALE_CLAIMS, 1u);
    }
    old = __shfl_sync(CAUSTIC_FULL_MASK, old, leader);
    const int before = task_pool_count(old);
    if (task_pool_kind(old) != TASK_POOL_ACTIVE || before <= 0) return false;
    __threadfence();  // acquire: the record was published before the header
    claim.slot = window * 32u + leader;
    claim.count = min((u32)before, take);
    claim.first = (u32)before - claim.count;
    if (task_pool_load(&pool.records[claim.slot].generation) != task_pool_generation(old)) {
        task_pool_fail(pool, TASK_POOL_ERR_GENERATION, claim.slot);
        return false;
    }
    return true;
}

// ----------------------------------------------------- advancing, finishing

// Publishes the slot's next step of `chunks` chunks (release).
__device__ __forceinline__ void task_pool_publish(TaskPool& pool, u32 slot, u32 chunks) {
    if (lane_id() == 0) {
        TaskRecord& r = pool.records[slot];
        r.chunks = chunks;
        r.unfinished = (int)chunks;
        __threadfence();
        atomicExch(pool.headers + slot,
                   task_pool_header((int)chunks, task_pool_load(&r.generation), TASK_POOL_ACTIVE));
    }
    __syncwarp();
}

// §3.7: the task in `slot` ended: notify its dependants (the increment that
// brings one's pending count to 0 publishes it), free the slot, count it.
__device__ void task_pool_complete(TaskPool& pool, u32 slot) {
    if (lane_id() == 0) {
        TaskRecord& r = pool.records[slot];
        __threadfence();
        for (u32 k = 0; k < 2; ++k) {
            const u32 target = task_pool_load(&r.activate[k]);
            if (target == TASK_POOL_NONE) continue;
            if (atomicAdd(&pool.records[target].pending, 1) == -1) {
                __threadfence();
                TaskRecord& t = pool.records[target];
                const u32 chunks = task_pool_load(&t.chunks);
                atomicExch(pool.headers + target,
                           task_pool_header((int)chunks, task_pool_load(&t.generation), TASK_POOL_ACTIVE));
            }
        }
        atomicExch(pool.headers + slot, task_pool_header(0, task_pool_load(&r.generation), TASK_POOL_EMPTY));
        atomicAdd(pool.control + TASK_POOL_PROGRESS, 1u);
        atomicSub(pool.control + TASK_POOL_LIVE, 1u);
    }
    __syncwarp();
}

// The last finisher's loop (§3.5, §3.8): ask the application for the next
// step; skip empty ones, run small ones (< K chunks) here, publish the rest.
template <class App>
__device__ void task_pool_advance(TaskPool& pool, App& app, u32 slot) {
    while (!task_pool_failed(pool)) {
        task_pool_charge(pool, TASK_POOL_WORK);
        const u32 chunks = app.next_step(pool, slot);
        __syncwarp();
        task_pool_charge(pool, TASK_POOL_POOL);
        if (chunks == TASK_POOL_DONE) {
            task_pool_complete(pool, slot);
            return;
        }
        if (chunks == 0u) continue;
        if (chunks < TASK_POOL_K) {
            task_pool_charge(pool, TASK_POOL_WORK);
            app.process(pool, slot, 0u, chunks);
            __syncwarp();
            pool.chunks += chunks;
            continue;
        }
        task_pool_publish(pool, slot, chunks);
        return;
    }
}

// Marks claimed chunks finished; the warp that finishes the step's last
// chunk advances the task.
template <class App>
__device__ void task_pool_finish(TaskPool& pool, App& app, const TaskClaim& claim) {
    __syncwarp();
    __threadfence();  // release: this warp's results before the counter
    int before = 0;
    if (lane_id() == 0) before = atomicSub(&pool.records[claim.slot].unfinished, (int)claim.count);
    before = __shfl_sync(CAUSTIC_FULL_MASK, before, 0);
    if (before == (int)claim.count) {
        __threadfence();  // acquire: every other warp's results
        task_pool_advance(pool, app, claim.slot);
    }
}

// ------------------------------------------------------------ the main loop

// Watches for a pool that makes no progress while this warp finds no work.
struct TaskPoolWatch {
    u32 progress;
    u64 since;
    u32 idle;
};

__device__ __forceinline__ void task_pool_watch_idle(TaskPool& pool, TaskPoolWatch& watch) {
    if ((++watch.idle & 63u) != 0u) return;
    const u32 progress = task_pool_load(pool.control + TASK_POOL_PROGRESS);
    const u64 now = task_pool_now_ns();
    if (progress != watch.progress || watch.since == 0) {
        watch.progress = progress;
        watch.since = now;
    } else if (now - watch.since > pool.watchdog_ns) {
        task_pool_fail(pool, TASK_POOL_ERR_STALLED, progress);
    }
    __nanosleep(64);
}

// Writes this warp's counters (lane 0).
__device__ __forceinline__ void task_pool_leave(TaskPool& pool) {
    task_pool_charge(pool, TASK_POOL_POOL);
    if (lane_id() == 0) {
        u64* c = pool.counters + (u64)TASK_POOL_COUNTER_WORDS * pool.warp;
        c[TASK_POOL_WORK] = pool.cycles[TASK_POOL_WORK];
        c[TASK_POOL_POOL] = pool.cycles[TASK_POOL_POOL];
        c[TASK_POOL_IDLE] = pool.cycles[TASK_POOL_IDLE];
        c[TASK_POOL_CHUNKS] = pool.chunks;
    }
}

// Algorithm 1 of the paper. The host sets the live count to 1 before the
// launch: that guard keeps warps from leaving before warp 0 has seeded.
template <class App>
__device__ void task_pool_run(TaskPool& pool, App& app) {
    if (pool.warp == 0) {
        task_pool_charge(pool, TASK_POOL_WORK);
        app.seed(pool);
        __syncwarp();
        task_pool_charge(pool, TASK_POOL_POOL);
        if (lane_id() == 0) {
            __threadfence();
            atomicSub(pool.control + TASK_POOL_LIVE, 1u);
        }
        __syncwarp();
    }
    u32 window = pool.warp;
    TaskPoolWatch watch = {0u, 0ull, 0u};
    while (!task_pool_failed(pool)) {
        TaskClaim claim;
        task_pool_charge(pool, TASK_POOL_POOL);
        if (task_pool_retrieve(pool, window, claim)) {
            task_pool_charge(pool, TASK_POOL_WORK);
            app.process(pool, claim.slot, claim.first, claim.count);
            __syncwarp();
            pool.chunks += claim.count;
            task_pool_charge(pool, TASK_POOL_POOL);
            task_pool_finish(pool, app, claim);
            watch.since = 0;
            continue;
        }
        task_pool_charge(pool, TASK_POOL_IDLE);
        if (task_pool_load(pool.control + TASK_POOL_LIVE) == 0u) break;
        task_pool_watch_idle(pool, watch);
    }
    task_pool_leave(pool);
}
