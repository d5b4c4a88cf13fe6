// self_test.cu: the task pool's self-test (self_test.rs), a recursive sum
// whose tasks depend on each other. A SUM task over a range longer than the
// leaf size splits (phase SPLIT, one chunk, so the warp that reaches it runs
// it at once, §3.8): it stores a COMBINE task dependent on two SUMs, stores
// the right half as a new SUM and turns itself into the left half. A SUM of
// at most `leaf` values adds them, 32 per chunk, into its record; when it
// ends, its result goes into its COMBINE's record and the runtime's
// activation counts it down. A COMBINE checks that both inputs arrived
// before it was activated (else the dependency order is broken: counted and
// an error), adds them and delivers the sum upwards. The host compares the
// total, the number of tasks stored and the number of COMBINEs with what the
// tree must have.
#include "task_pool.cuh"

#define SUM_SPLIT 0u
#define SUM_REDUCE 1u
#define SUM_COMBINE 2u

// Payload words.
#define SUM_ACC 0u      // u64 accumulator (REDUCE)
#define SUM_TARGET 2u   // COMBINE slot that takes the result, NONE: the output
#define SUM_INPUT 3u    // which of the target's two inputs
#define SUM_ARRIVED 4u  // COMBINE: bit k set once input k is written
#define SUM_INPUTS 6u   // COMBINE: two u64 inputs

#define SUM_COMBINES 0u
#define SUM_REDUCES 1u
#define SUM_EARLY 2u

struct RecursiveSum {
    const u32* values;
    u64 n;
    u32 leaf;
    u64* output;
    u32* counts;

    __device__ static u64* word64(TaskRecord& r, u32 word) { return (u64*)(r.payload + word); }

    __device__ u32 phase_of(u32 length) const { return length > leaf ? SUM_SPLIT : SUM_REDUCE; }

    __device__ static u32 chunks_of(u32 phase, u32 length) {
        return phase == SUM_REDUCE ? max(1u, (length + 31u) / 32u) : 1u;
    }

    // Lane 0: a SUM over begin .. end delivering to (target, input).
    __device__ void write_sum(TaskRecord& r, u32 begin, u32 end, u32 target, u32 input) const {
        r.begin = begin, r.end = end, r.phase = phase_of(end - begin), r.step = 0u;
        *word64(r, SUM_ACC) = 0ull;
        r.payload[SUM_TARGET] = target;
        r.payload[SUM_INPUT] = input;
    }

    __device__ void seed(TaskPool& pool) {
        const u32 slot = task_pool_store_begin(pool);
        if (slot == TASK_POOL_NONE) return;
        if (lane_id() == 0) write_sum(pool.records[slot], 0u, (u32)n, TASK_POOL_NONE, 0u);
        __syncwarp();
        const u32 phase = phase_of((u32)n);
        task_pool_store_end(pool, slot, chunks_of(phase, (u32)n), 0u, TASK_POOL_NONE, TASK_POOL_NONE);
    }

    __device__ void process(TaskPool& pool, u32 slot, u32 first, u32 count) {
        TaskRecord& r = pool.records[slot];
        if (task_pool_load(&r.phase) != SUM_REDUCE) return;
        const u32 begin = task_pool_load(&r.begin), end = task_pool_load(&r.end);
        u64 sum = 0;
        for (u32 c = first; c < first + count; ++c) {
            const u32 i = begin + 32u * c + lane_id();
            if (i < end) sum += values[i];
        }
        for (u32 d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(CAUSTIC_FULL_MASK, sum, d);
        if (lane_id() == 0) atomicAdd(word64(r, SUM_ACC), sum);
    }

    // Lane 0: the task's result to its COMBINE (or the output).
    __device__ void deliver(TaskPool& pool, TaskRecord& r, u64 result) const {
        const u32 target = task_pool_load(&r.payload[SUM_TARGET]);
        if (target == TASK_POOL_NONE) {
            *output = result;
            return;
        }
        const u32 input = task_pool_load(&r.payload[SUM_INPUT]);
        TaskRecord& t = pool.records[target];
        *word64(t, SUM_INPUTS + 2u * input) = result;
        __threadfence();
        atomicOr(&t.payload[SUM_ARRIVED], 1u << input);
    }

    __device__ u32 next_step(TaskPool& pool, u32 slot) {
        TaskRecord& r = pool.records[slot];
        const u32 phase = task_pool_load(&r.phase);
        if (phase == SUM_SPLIT) return split(pool, slot);
        if (lane_id() == 0) {
            if (phase == SUM_REDUCE) {
                atomicAdd(counts + SUM_REDUCES, 1u);
                deliver(pool, r, task_pool_load(word64(r, SUM_ACC)));
            } else {
                const u32 arrived = task_pool_load(&r.payload[SUM_ARRIVED]);
                if (arrived != 3u) {
                    atomicAdd(counts + SUM_EARLY, 1u);
                    task_pool_fail(pool, TASK_POOL_ERR_APP, slot);
                }
                atomicAdd(counts + SUM_COMBINES, 1u);
                deliver(pool, r,
                        task_pool_load(word64(r, SUM_INPUTS)) + task_pool_load(word64(r, SUM_INPUTS + 2u)));
            }
        }
        __syncwarp();
        return TASK_POOL_DONE;
    }

    // COMBINE first (the dependant is stored before its activators), then
    // the right half; this task becomes the left half.
    __device__ u32 split(TaskPool& pool, u32 slot) {
        TaskRecord& r = pool.records[slot];
        const u32 begin = task_pool_load(&r.begin), end = task_pool_load(&r.end);
        const u32 mid = begin + (end - begin) / 2u;
        const u32 combine = task_pool_store_begin(pool);
        if (combine == TASK_POOL_NONE) return TASK_POOL_DONE;
        if (lane_id() == 0) {
            TaskRecord& c = pool.records[combine];
            c.begin = 0u, c.end = 0u, c.phase = SUM_COMBINE, c.step = 0u;
            c.payload[SUM_TARGET] = task_pool_load(&r.payload[SUM_TARGET]);
            c.payload[SUM_INPUT] = task_pool_load(&r.payload[SUM_INPUT]);
            c.payload[SUM_ARRIVED] = 0u;
        }
        __syncwarp();
        task_pool_store_end(pool, combine, 1u, 2u, task_pool_load(&r.activate[0]), TASK_POOL_NONE);
        const u32 right = task_pool_store_begin(pool);
        if (right == TASK_POOL_NONE) return TASK_POOL_DONE;
        if (lane_id() == 0) write_sum(pool.records[right], mid, end, combine, 1u);
        __syncwarp();
        task_pool_store_end(pool, right, chunks_of(phase_of(end - mid), end - mid), 0u, combine, TASK_POOL_NONE);
        if (lane_id() == 0) {
            write_sum(r, begin, mid, combine, 0u);
            r.activate[0] = combine;
        }
        __syncwarp();
        return chunks_of(phase_of(mid - begin), mid - begin);
    }
};

// The sum of values[0 .. n) into output[0], in tasks of at most `leaf`
// values; counts: COMBINEs run, REDUCEs run, COMBINEs activated early.
extern "C" __global__ void task_pool_recursive_sum(const u32* values, u64 n, u32 leaf, u64* output, u32* counts,
                                                   u64* headers, u32* records, u32* control, u64* counters,
                                                   u32 capacity, u64 watchdog_ns) {
    TaskPool pool = task_pool_attach(headers, records, control, counters, capacity, watchdog_ns);
    RecursiveSum app = {values, n, leaf, output, counts};
    task_pool_run(pool, app);
}
