// cuda_fibers.h: enough of CUDA for the host C++ compiler to compile
// warp-synchronous kernels unchanged and run them block by block, every
// CUDA thread a fiber (its own stack, switched by hand), for
// tests/sah_kernels_on_cpu.rs, dacrt_kernels_on_cpu.rs and
// prims_kernels_on_cpu.rs. Unlike cuda_shim.h (one thread at a time, no
// warps), this one has barriers, shuffles and ballots:
//
// - a block's threads run as fibers on one OS thread; a thread runs until
//   it reaches a barrier (__syncthreads, __syncwarp, or the two barriers
//   around every shuffle and ballot) or returns;
// - a warp barrier opens when every lane of the warp has reached it, a
//   block barrier when every thread not yet returned has; anything else
//   (a lane returned while its warp shuffles, lanes of one warp at
//   different barriers, a barrier nobody can open) is a bug of the kernel
//   and aborts naming it;
// - __shared__ variables are statics (blocks run one after another);
// - atomics are plain read-modify-writes (one fiber runs at a time);
// - a persistent kernel's blocks run one after another, so the first does
//   all the work (the task pool's warps take turns at every barrier).
//
// Built with -ffp-contract=off, so every float operation rounds once, as
// the kernels' _rn intrinsics do on the GPU. x86-64 only (the switch is a
// few lines of assembly).
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "cuda_host_common.h"

#define __shared__ static

template <class T>
inline T atomicAdd(T* p, T v) {
    T old = *p;
    *p = old + v;
    return old;
}
inline int atomicMin(int* p, int v) {
    int old = *p;
    *p = v < old ? v : old;
    return old;
}
inline int atomicMax(int* p, int v) {
    int old = *p;
    *p = v > old ? v : old;
    return old;
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
    unsigned old = *p;
    *p = v > old ? v : old;
    return old;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    unsigned long long old = *p;
    *p = v < old ? v : old;
    return old;
}
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
    unsigned long long old = *p;
    *p = v > old ? v : old;
    return old;
}
template <class T>
inline T atomicSub(T* p, T v) {
    T old = *p;
    *p = old - v;
    return old;
}
template <class T>
inline T atomicExch(T* p, T v) {
    T old = *p;
    *p = v;
    return old;
}
template <class T>
inline T atomicOr(T* p, T v) {
    T old = *p;
    *p = old | v;
    return old;
}
template <class T>
inline T atomicCAS(T* p, T compare, T v) {
    T old = *p;
    if (old == compare) *p = v;
    return old;
}
// Loads past L1: one fiber runs at a time, so a plain load.
template <class T>
inline T __ldcg(const T* p) {
    return *p;
}
template <class T>
inline void __stcg(T* p, T v) {
    *p = v;
}
// The cycle counter (the task pool's accounting) and the nanosecond clock
// (its watchdog; the device's %globaltimer).
inline long long clock64() {
    static long long cycles = 0;
    return ++cycles;
}
inline unsigned long long emu_now_ns() {
    return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// ------------------------------------------------------------------ fibers

extern "C" void fiber_switch(void** save_sp, void* load_sp);
asm(R"(
    .text
    .globl fiber_switch
    .type fiber_switch, @function
fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size fiber_switch, .-fiber_switch
)");

namespace emu {

enum State { RUNNING, AT_WARP_BARRIER, AT_BLOCK_BARRIER, DONE };

struct Fiber {
    void* sp = nullptr;
    State state = RUNNING;
    unsigned index = 0;
};

constexpr size_t STACK_BYTES = 256 * 1024;

struct Scheduler {
    const char* kernel = "";
    std::vector<Fiber> fibers;
    std::vector<unsigned char> stacks;
    void* scheduler_sp = nullptr;
    Fiber* current = nullptr;
    std::function<void()> body;
    // Per warp, one 64-bit word per lane for shuffles and ballots.
    std::vector<unsigned long long> exchange;
};

inline Scheduler& sched() {
    static Scheduler s;
    return s;
}

inline unsigned& block_index() {
    static unsigned b;
    return b;
}

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "cuda_fibers: %s in kernel %s (block %u)\n", what, sched().kernel,
                 block_index());
    std::abort();
}

inline dim3_shim& block_idx() {
    static dim3_shim b;
    return b;
}
inline dim3_shim& block_dim() {
    static dim3_shim b;
    return b;
}
inline dim3_shim& grid_dim() {
    static dim3_shim g;
    return g;
}
inline dim3_shim thread_idx() { return {sched().current->index, 0, 0}; }

inline void yield_to_scheduler() {
    Scheduler& s = sched();
    fiber_switch(&s.current->sp, s.scheduler_sp);
}

[[noreturn]] inline void fiber_entry() {
    Scheduler& s = sched();
    s.body();
    s.current->state = DONE;
    fiber_switch(&s.current->sp, s.scheduler_sp);
    std::abort();
}

inline void barrier(State kind) {
    sched().current->state = kind;
    yield_to_scheduler();
}

// Opens the barriers that every thread concerned has reached; false when
// none could open.
inline bool open_barriers(Scheduler& s) {
    const size_t n = s.fibers.size();
    bool opened = false;
    for (size_t w = 0; w * 32 < n; ++w) {
        unsigned at = 0, done = 0;
        for (size_t l = w * 32; l < w * 32 + 32 && l < n; ++l) {
            at += s.fibers[l].state == AT_WARP_BARRIER;
            done += s.fibers[l].state == DONE;
        }
        if (at == 0) continue;
        if (done > 0) fail("a warp-wide operation with lanes that have returned");
        if (at == 32) {
            for (size_t l = w * 32; l < w * 32 + 32; ++l) s.fibers[l].state = RUNNING;
            opened = true;
        }
    }
    if (opened) return true;
    size_t at_block = 0, done = 0;
    for (const Fiber& f : s.fibers) {
        at_block += f.state == AT_BLOCK_BARRIER;
        done += f.state == DONE;
    }
    if (at_block > 0 && at_block + done == n) {
        for (Fiber& f : s.fibers)
            if (f.state == AT_BLOCK_BARRIER) f.state = RUNNING;
        return true;
    }
    return false;
}

// Runs `body` as every thread of one block.
inline void run_block(unsigned threads) {
    Scheduler& s = sched();
    s.fibers.assign(threads, Fiber());
    if (s.stacks.size() < threads * STACK_BYTES) s.stacks.resize(threads * STACK_BYTES);
    s.exchange.assign((threads + 31) / 32 * 32, 0);
    for (unsigned t = 0; t < threads; ++t) {
        Fiber& f = s.fibers[t];
        f.index = t;
        uintptr_t top = (uintptr_t)(s.stacks.data() + (t + 1) * STACK_BYTES) & ~(uintptr_t)15;
        uintptr_t* sp = (uintptr_t*)top;
        *--sp = 0;                       // where fiber_entry would return to
        *--sp = (uintptr_t)&fiber_entry; // fiber_switch returns here
        for (int r = 0; r < 6; ++r) *--sp = 0;
        f.sp = sp;
    }
    while (true) {
        for (Fiber& f : s.fibers) {
            if (f.state != RUNNING) continue;
            s.current = &f;
            fiber_switch(&s.scheduler_sp, f.sp);
        }
        size_t done = 0;
        for (const Fiber& f : s.fibers) done += f.state == DONE;
        if (done == threads) break;
        if (!open_barriers(s)) fail("threads wait at barriers that cannot open");
    }
    s.current = nullptr;
}

// Launches `kernel(args...)` on `blocks` blocks of `threads` threads.
template <class F, class... A>
void launch(const char* name, unsigned blocks, unsigned threads, F kernel, A... args) {
    if (threads == 0 || threads % 32 != 0 || threads > 1024) {
        std::fprintf(stderr, "cuda_fibers: %s launched with %u threads\n", name, threads);
        std::abort();
    }
    Scheduler& s = sched();
    s.kernel = name;
    s.body = [&]() { kernel(args...); };
    block_dim() = {threads, 1, 1};
    grid_dim() = {blocks, 1, 1};
    for (unsigned b = 0; b < blocks; ++b) {
        block_idx() = {b, 0, 0};
        block_index() = b;
        run_block(threads);
    }
}

// One lane's value to the warp's exchange words, and back after a barrier.
template <class T>
inline T exchange(T value, unsigned source) {
    static_assert(sizeof(T) <= 8, "shuffled values are at most 8 bytes");
    Scheduler& s = sched();
    const unsigned lane = s.current->index & 31u, base = s.current->index & ~31u;
    unsigned long long word = 0;
    std::memcpy(&word, &value, sizeof(T));
    s.exchange[base + lane] = word;
    barrier(AT_WARP_BARRIER);
    word = s.exchange[base + (source & 31u)];
    barrier(AT_WARP_BARRIER);
    T out;
    std::memcpy(&out, &word, sizeof(T));
    return out;
}

inline void check_mask(unsigned mask) {
    if (mask != 0xffffffffu) fail("a warp-wide operation with a partial mask");
}

} // namespace emu

#define threadIdx (::emu::thread_idx())
#define blockIdx (::emu::block_idx())
#define blockDim (::emu::block_dim())
#define gridDim (::emu::grid_dim())

inline void __syncthreads() { emu::barrier(emu::AT_BLOCK_BARRIER); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    emu::check_mask(mask);
    emu::barrier(emu::AT_WARP_BARRIER);
}
inline void __nanosleep(unsigned) { emu::yield_to_scheduler(); }
inline void __threadfence() {}

template <class T>
inline T __shfl_sync(unsigned mask, T v, int lane) {
    emu::check_mask(mask);
    return emu::exchange(v, (unsigned)lane);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned d) {
    emu::check_mask(mask);
    const unsigned lane = threadIdx.x & 31u;
    const T got = emu::exchange(v, lane >= d ? lane - d : lane);
    return got;
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned d) {
    emu::check_mask(mask);
    const unsigned lane = threadIdx.x & 31u;
    return emu::exchange(v, lane + d < 32u ? lane + d : lane);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int x) {
    emu::check_mask(mask);
    return emu::exchange(v, (threadIdx.x & 31u) ^ (unsigned)x);
}
inline unsigned __ballot_sync(unsigned mask, bool p) {
    emu::check_mask(mask);
    emu::Scheduler& s = emu::sched();
    const unsigned base = s.current->index & ~31u;
    s.exchange[s.current->index] = p ? 1 : 0;
    emu::barrier(emu::AT_WARP_BARRIER);
    unsigned bits = 0;
    for (unsigned l = 0; l < 32; ++l) bits |= (unsigned)s.exchange[base + l] << l;
    emu::barrier(emu::AT_WARP_BARRIER);
    return bits;
}
