//! Every GPU primitive against its CPU twin (`ops::cpu`), on fresh random
//! inputs each run, at sizes around warp, block and tile boundaries, with
//! outputs poisoned first so an unwritten element fails.
//!
//! These need a CUDA GPU: run with `--include-ignored --test-threads=1` on
//! the GPU machine (`scripts/gpu-run.sh`). Each test prints its seed; set
//! `CAUSTIC_TEST_SEED` to replay one.

#[path = "common/device.rs"]
mod device;

use bytemuck::Pod;
use caustic_geom::{Aabb, Pcg32, Vec3};
use caustic_gpu::ops::scan::{Direction, ScanKind};
use caustic_gpu::ops::segment::SegmentOp;
use caustic_gpu::ops::{compact, cpu, radix_sort, reduce, scan, segment, split};
use caustic_gpu::{DeviceBuffer, GpuError};
use device::gpu;

const SIZES: &[usize] = &[
    0,
    1,
    2,
    31,
    32,
    33,
    1023,
    1024,
    1025,
    4095,
    4097,
    (1 << 16) - 1,
    (1 << 16) + 1,
    (1 << 20) + 3,
    1 << 24,
];

fn rng(test: &str) -> Pcg32 {
    device::seeded_rng(test, 0x5eed)
}

fn upload<T: Pod>(data: &[T]) -> DeviceBuffer<T> {
    DeviceBuffer::from_slice(gpu(), "test input", data).unwrap()
}

fn poisoned<T: Pod>(len: usize) -> DeviceBuffer<T> {
    let mut buffer = DeviceBuffer::uninit(gpu(), "test output", len).unwrap();
    buffer.poison().unwrap();
    buffer
}

fn random_u32(rng: &mut Pcg32, n: usize) -> Vec<u32> {
    (0..n).map(|_| rng.next_u32()).collect()
}

/// 0/1 flags, each set with probability `p`.
fn random_flags(rng: &mut Pcg32, n: usize, p: f32) -> Vec<u32> {
    (0..n).map(|_| u32::from(rng.next_f32() < p)).collect()
}

fn assert_same<T: PartialEq + std::fmt::Debug>(what: &str, n: usize, gpu: &[T], cpu: &[T]) {
    assert_eq!(gpu.len(), cpu.len(), "{what}, n = {n}: lengths differ");
    if let Some(i) = (0..gpu.len()).find(|&i| gpu[i] != cpu[i]) {
        panic!(
            "{what}, n = {n}: first difference at {i}: gpu {:?}, cpu {:?}",
            gpu[i], cpu[i]
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_module_loads_on_the_device() {
    for module in caustic_gpu::kernels::MODULES {
        gpu().load(module).unwrap();
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn own_streams_stand_above_and_below_the_first() {
    use caustic_gpu::{Gpu, StreamPriority};
    use cudarc::driver::{result, sys};
    let priority = |g: &Gpu| {
        let mut p = 0;
        // SAFETY: the stream is live for the handle's life; p is valid for a write.
        unsafe { sys::cuStreamGetPriority(g.stream().cu_stream(), &mut p) }
            .result()
            .unwrap();
        p
    };
    gpu().context().bind_to_thread().unwrap();
    let (least, greatest) = result::stream::get_priority_range().unwrap();
    let same = priority(gpu());
    let above = priority(&gpu().with_own_stream_at(StreamPriority::Above).unwrap());
    let below = priority(&gpu().with_own_stream_at(StreamPriority::Below).unwrap());
    assert_eq!((above, below), (greatest, least));
    assert_eq!(priority(&gpu().with_own_stream().unwrap()), same);
    // Smaller numbers run first: with three levels or more, strictly between.
    if least - greatest >= 2 {
        assert!(above < same && same < below, "{above} {same} {below}");
    } else {
        assert!(above <= same && same <= below, "{above} {same} {below}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn allocation_failure_names_the_buffer() {
    match DeviceBuffer::<u8>::uninit(gpu(), "impossible test buffer", 1 << 50) {
        Err(GpuError::OutOfMemory { what, bytes, .. }) => {
            assert_eq!(what, "impossible test buffer");
            assert_eq!(bytes, 1 << 50);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // The device is still usable afterwards.
    assert_eq!(upload(&[1u32, 2]).download().unwrap(), [1, 2]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ranged_fills_and_downloads_touch_only_their_range() {
    let data: Vec<u32> = (0..1000).collect();
    let mut buffer = upload(&data);
    buffer.fill_bytes_in(100..300, 1).unwrap();
    let mut expected = data.clone();
    expected[100..300].fill(0x0101_0101);
    assert_eq!(buffer.download().unwrap(), expected);
    let mut part = vec![0u32; 250];
    buffer.download_range_into(90, &mut part).unwrap();
    assert_eq!(part, expected[90..340]);
    // Ranges past the end are errors, not faults.
    assert!(buffer.fill_bytes_in(990..1001, 0).is_err());
    assert!(buffer.download_range_into(900, &mut part).is_err());
    buffer.fill_bytes_in(5..5, 7).unwrap();
    buffer.download_range_into(1000, &mut []).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn reductions_match_cpu() {
    let mut rng = rng("reductions_match_cpu");
    for &n in SIZES {
        let values = random_u32(&mut rng, n);
        let small: Vec<u32> = values.iter().map(|v| v % 5).collect();
        let buffer = upload(&values);
        assert_eq!(
            reduce::sum_u32(&buffer).unwrap(),
            cpu::sum_u32(&values),
            "sum, n = {n}"
        );
        assert_eq!(
            reduce::min_u32(&buffer).unwrap(),
            cpu::min_u32(&values),
            "min, n = {n}"
        );
        assert_eq!(
            reduce::max_u32(&buffer).unwrap(),
            cpu::max_u32(&values),
            "max, n = {n}"
        );
        assert_eq!(
            reduce::count_nonzero_u32(&upload(&small)).unwrap(),
            cpu::count_nonzero_u32(&small),
            "count, n = {n}"
        );

        let floats: Vec<f32> = (0..n).map(|_| rng.next_f32() * 2.0 - 1.0).collect();
        let buffer = upload(&floats);
        let (gpu_sum, cpu_sum) = (reduce::sum_f32(&buffer).unwrap(), cpu::sum_f32(&floats));
        let scale: f32 = floats.iter().map(|v| v.abs()).sum::<f32>().max(1.0);
        assert!(
            (gpu_sum - cpu_sum).abs() <= 1e-5 * scale,
            "f32 sum, n = {n}: gpu {gpu_sum}, cpu {cpu_sum}"
        );
        assert_eq!(
            reduce::min_f32(&buffer).unwrap(),
            cpu::min_f32(&floats),
            "min f32, n = {n}"
        );
        assert_eq!(
            reduce::max_f32(&buffer).unwrap(),
            cpu::max_f32(&floats),
            "max f32, n = {n}"
        );

        let boxes: Vec<Aabb> = (0..n)
            .map(|_| {
                let p = Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()) * 200.0 - 100.0;
                Aabb::new(
                    p,
                    p + Vec3::new(rng.next_f32(), rng.next_f32(), rng.next_f32()),
                )
            })
            .collect();
        assert_eq!(
            reduce::union_aabb(&upload(&boxes)).unwrap(),
            cpu::union_aabb(&boxes),
            "box union, n = {n}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn scans_match_cpu() {
    let mut rng = rng("scans_match_cpu");
    for &n in SIZES {
        // Full-range values also check that sums wrap modulo 2^32.
        let values = random_u32(&mut rng, n);
        let input = upload(&values);
        for kind in [ScanKind::Exclusive, ScanKind::Inclusive] {
            for direction in [Direction::Forward, Direction::Backward] {
                let what = format!("{kind:?} {direction:?} scan");
                let mut output = poisoned(n);
                let mut total = poisoned(1);
                scan::scan_u32(&input, &mut output, kind, direction, Some(&mut total)).unwrap();
                let (expected, expected_total) = cpu::scan_u32(&values, kind, direction);
                assert_same(&what, n, &output.download().unwrap(), &expected);
                assert_eq!(
                    total.download().unwrap()[0],
                    expected_total,
                    "{what} total, n = {n}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn segmented_scans_match_cpu() {
    let mut rng = rng("segmented_scans_match_cpu");
    for &n in SIZES {
        let values: Vec<u32> = (0..n).map(|_| rng.next_u32() % 1000).collect();
        let input = upload(&values);
        // Long segments crossing tiles, short ones, one segment, all heads.
        for density in [0.0002, 0.05, 0.0, 1.0] {
            let heads = random_flags(&mut rng, n, density);
            let heads_buffer = upload(&heads);
            for kind in [ScanKind::Exclusive, ScanKind::Inclusive] {
                let what = format!("segmented {kind:?} scan, head density {density}");
                let mut output = poisoned(n);
                let mut total = poisoned(1);
                scan::segmented_u32(&input, &heads_buffer, &mut output, kind, Some(&mut total))
                    .unwrap();
                let (expected, last) = cpu::segmented_scan_u32(&values, &heads, kind);
                assert_same(&what, n, &output.download().unwrap(), &expected);
                assert_eq!(total.download().unwrap()[0], last, "{what} total, n = {n}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn compaction_matches_cpu() {
    let mut rng = rng("compaction_matches_cpu");
    for &n in SIZES {
        let values = random_u32(&mut rng, n);
        let input = upload(&values);
        for density in [0.5, 0.01, 0.0, 1.0] {
            let flags = random_flags(&mut rng, n, density);
            let flags_buffer = upload(&flags);
            let what = format!("compaction, density {density}");

            let mut out = poisoned(n);
            let mut count = poisoned(1);
            compact::select_u32_into(&input, &flags_buffer, &mut out, &mut count).unwrap();
            let expected = cpu::compact_u32(&values, &flags);
            let kept = count.download().unwrap()[0] as usize;
            assert_eq!(kept, expected.len(), "{what} count, n = {n}");
            assert_same(&what, n, &out.download().unwrap()[..kept], &expected);

            let indices = compact::select_indices(&flags_buffer).unwrap();
            let expected_indices = cpu::select_indices(&flags);
            assert_same(
                &format!("index {what}"),
                n,
                &indices.download().unwrap(),
                &expected_indices,
            );
            check_wave_gather(&mut rng, n, &indices, &expected_indices);
            check_padded_wave_gather(&mut rng, n, &flags_buffer, &expected_indices);
        }
    }
}

/// `select_indices_at` leaves the count where it is asked to, and
/// `gather_wave_padded` gathers that many and pads the rest of its bound.
fn check_padded_wave_gather(rng: &mut Pcg32, n: usize, flags: &DeviceBuffer<u32>, kept: &[u32]) {
    let slot = 2;
    let mut counts = upload(&[7u32, 7, 7, 7]);
    let mut indices = poisoned(n);
    let mut scratch = compact::SelectScratch::new(gpu(), n).unwrap();
    // Twice with one scratch: it is reset for each selection.
    for _ in 0..2 {
        compact::select_indices_at(flags, &mut indices, (&mut counts, slot), &mut scratch).unwrap();
    }
    let got_counts = counts.download().unwrap();
    assert_eq!(got_counts, [7, 7, kept.len() as u32, 7], "counts, n = {n}");
    let rays: Vec<[u32; 8]> = (0..n)
        .map(|_| std::array::from_fn::<u32, 8, _>(|_| rng.next_u32()))
        .collect();
    let records: Vec<[u64; 4]> = (0..n).map(|i| [i as u64; 4]).collect();
    let pad_ray = upload(&[[u32::MAX; 8]]);
    let pad_record = upload(&[[u64::MAX; 4]]);
    // The bound: every slot, as a host that has not read the count has.
    let mut out_rays = poisoned(n);
    let mut out_records = poisoned(n);
    compact::gather_wave_padded(
        &upload(&rays),
        &upload(&records),
        &indices,
        (&counts, slot),
        &pad_ray,
        &pad_record,
        &mut out_rays,
        &mut out_records,
    )
    .unwrap();
    let mut want_rays: Vec<[u32; 8]> = kept.iter().map(|&i| rays[i as usize]).collect();
    want_rays.resize(n, [u32::MAX; 8]);
    let mut want_records: Vec<[u64; 4]> = kept.iter().map(|&i| records[i as usize]).collect();
    want_records.resize(n, [u64::MAX; 4]);
    assert_same("padded rays", n, &out_rays.download().unwrap(), &want_rays);
    assert_same(
        "padded records",
        n,
        &out_records.download().unwrap(),
        &want_records,
    );
}

/// `gather_wave` moves each kept ray and its 32-byte record together.
fn check_wave_gather(rng: &mut Pcg32, n: usize, indices: &DeviceBuffer<u32>, kept: &[u32]) {
    let rays: Vec<[u32; 8]> = (0..n)
        .map(|_| std::array::from_fn::<u32, 8, _>(|_| rng.next_u32()))
        .collect();
    let records: Vec<[u64; 4]> = (0..n)
        .map(|_| {
            std::array::from_fn(|_| u64::from(rng.next_u32()) << 32 | u64::from(rng.next_u32()))
        })
        .collect();
    let mut out_rays = poisoned(kept.len());
    let mut out_records = poisoned(kept.len());
    compact::gather_wave(
        &upload(&rays),
        &upload(&records),
        indices,
        &mut out_rays,
        &mut out_records,
    )
    .unwrap();
    let want_rays: Vec<[u32; 8]> = kept
        .iter()
        .map(|&i| bytemuck::cast(rays[i as usize]))
        .collect();
    let got_rays: Vec<[u32; 8]> = out_rays
        .download()
        .unwrap()
        .iter()
        .map(|r| bytemuck::cast(*r))
        .collect();
    assert_same("gathered rays", n, &got_rays, &want_rays);
    let want: Vec<[u64; 4]> = kept.iter().map(|&i| records[i as usize]).collect();
    assert_same(
        "gathered records",
        n,
        &out_records.download().unwrap(),
        &want,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn segmented_split_matches_cpu() {
    let mut rng = rng("segmented_split_matches_cpu");
    for &n in SIZES {
        let values = random_u32(&mut rng, n);
        let input = upload(&values);
        for (density, head_density) in [
            (0.5, 0.01),
            (0.3, 0.5),
            (0.0, 0.1),
            (1.0, 0.001),
            (0.5, 0.0),
        ] {
            let flags = random_flags(&mut rng, n, density);
            let heads = random_flags(&mut rng, n, head_density);
            let out =
                split::segmented_partition_u32(&input, &upload(&flags), &upload(&heads)).unwrap();
            let expected = cpu::segmented_split_u32(&values, &flags, &heads);
            let what = format!("segmented split, flags {density}, heads {head_density}");
            assert_same(&what, n, &out.download().unwrap(), &expected);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn split_matches_cpu() {
    let mut rng = rng("split_matches_cpu");
    for &n in SIZES {
        let values = random_u32(&mut rng, n);
        let input = upload(&values);
        for density in [0.5, 0.01, 0.0, 1.0] {
            let flags = random_flags(&mut rng, n, density);
            let flags_buffer = upload(&flags);
            let mut out = poisoned(n);
            let point = split::partition_u32(&input, &flags_buffer, &mut out).unwrap();
            let (expected, expected_point) = cpu::split_u32(&values, &flags);
            let what = format!("split, density {density}");
            assert_eq!(point, expected_point, "{what} point, n = {n}");
            assert_same(&what, n, &out.download().unwrap(), &expected);

            let mut indices = poisoned(n);
            let mut point = poisoned(1);
            split::partition_indices_into(&flags_buffer, &mut indices, &mut point).unwrap();
            let all: Vec<u32> = (0..n as u32).collect();
            let (expected, expected_point) = cpu::split_u32(&all, &flags);
            assert_eq!(point.download().unwrap()[0] as usize, expected_point);
            assert_same(
                &format!("index {what}"),
                n,
                &indices.download().unwrap(),
                &expected,
            );
        }
    }
}

/// Key distributions that stress different parts of the sort.
fn key_sets(rng: &mut Pcg32, n: usize) -> Vec<(&'static str, Vec<u64>)> {
    let uniform: Vec<u64> = (0..n)
        .map(|_| (u64::from(rng.next_u32()) << 32) | u64::from(rng.next_u32()))
        .collect();
    vec![
        ("uniform", uniform.clone()),
        // Many equal keys: stability matters everywhere.
        ("16 distinct", uniform.iter().map(|k| k % 16).collect()),
        // Every key equal: one digit holds the whole input in every pass.
        ("all equal", vec![0x0123_4567_89ab_cdef; n]),
        ("descending", (0..n as u64).rev().collect()),
    ]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn radix_sort_u32_pairs_is_a_stable_sort() {
    let mut rng = rng("radix_sort_u32_pairs_is_a_stable_sort");
    for &n in SIZES {
        for (name, keys64) in key_sets(&mut rng, n) {
            let keys: Vec<u32> = keys64.iter().map(|&k| k as u32).collect();
            let order: Vec<u32> = (0..n as u32).collect();
            let mut key_buffer = upload(&keys);
            let mut value_buffer = upload(&order);
            radix_sort::sort_pairs(&mut key_buffer, &mut value_buffer).unwrap();
            let (sorted, permutation) = (
                key_buffer.download().unwrap(),
                value_buffer.download().unwrap(),
            );
            if let Err(why) = cpu::verify_stable_sort(&keys, &sorted, &permutation) {
                panic!("u32 pairs, {name} keys, n = {n}: {why}");
            }
            if n <= 1 << 20 {
                let (expected_keys, expected_values) = cpu::sort_pairs(&keys, &order);
                assert_same("u32 sorted keys", n, &sorted, &expected_keys);
                assert_same("u32 sorted values", n, &permutation, &expected_values);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn radix_sort_u64_pairs_and_keys_only() {
    let mut rng = rng("radix_sort_u64_pairs_and_keys_only");
    for &n in SIZES {
        for (name, keys) in key_sets(&mut rng, n) {
            let order: Vec<u32> = (0..n as u32).collect();
            let mut key_buffer = upload(&keys);
            let mut value_buffer = upload(&order);
            radix_sort::sort_pairs(&mut key_buffer, &mut value_buffer).unwrap();
            let sorted = key_buffer.download().unwrap();
            if let Err(why) =
                cpu::verify_stable_sort(&keys, &sorted, &value_buffer.download().unwrap())
            {
                panic!("u64 pairs, {name} keys, n = {n}: {why}");
            }

            let mut keys_only = upload(&keys);
            radix_sort::sort_keys(&mut keys_only).unwrap();
            assert_same("u64 keys only", n, &keys_only.download().unwrap(), &sorted);
        }
    }
}

/// 30-bit keys sorted on bits 0..30 (Morton codes): four passes, so the
/// result ends in the alternate buffers and is swapped back; and 0..12, an
/// odd two-pass range that ignores the upper bits.
#[test]
#[ignore = "needs a CUDA GPU"]
fn radix_sort_bit_ranges() {
    let mut rng = rng("radix_sort_bit_ranges");
    for &n in &[1000usize, 4096 * 3 + 7, 1 << 20] {
        for bits in [0..30u32, 0..12, 8..24] {
            let keys: Vec<u32> = (0..n).map(|_| rng.next_u32() >> 2).collect();
            let order: Vec<u32> = (0..n as u32).collect();
            let mask = ((1u64 << bits.end) - 1) as u32 & !((1u32 << bits.start) - 1);
            let masked: Vec<u32> = keys.iter().map(|k| k & mask).collect();
            let mut key_buffer = upload(&keys);
            let mut value_buffer = upload(&order);
            radix_sort::sort_pairs_bits(&mut key_buffer, &mut value_buffer, bits.clone()).unwrap();
            let permutation = value_buffer.download().unwrap();
            let sorted_masked: Vec<u32> = key_buffer
                .download()
                .unwrap()
                .iter()
                .map(|k| k & mask)
                .collect();
            if let Err(why) = cpu::verify_stable_sort(&masked, &sorted_masked, &permutation) {
                panic!("bits {bits:?}, n = {n}: {why}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn segment_utilities_match_cpu() {
    let mut rng = rng("segment_utilities_match_cpu");
    for &n in SIZES {
        let values: Vec<u32> = (0..n).map(|_| rng.next_u32() % 100_000).collect();
        let input = upload(&values);
        let segments = 1 + n / 37;
        let mut sorted_owner: Vec<u32> = (0..n).map(|_| rng.next_u32() % segments as u32).collect();
        let random_owner = sorted_owner.clone();
        sorted_owner.sort_unstable();
        for (order, owner) in [("sorted", &sorted_owner), ("random", &random_owner)] {
            let owner_buffer = upload(owner);
            for op in [SegmentOp::Sum, SegmentOp::Min, SegmentOp::Max] {
                let got = segment::reduce_by_owner(&input, &owner_buffer, segments, op).unwrap();
                let expected = cpu::reduce_by_owner(&values, owner, segments, op);
                assert_same(
                    &format!("{op:?} by {order} owner"),
                    n,
                    &got.download().unwrap(),
                    &expected,
                );
            }
        }

        let indices: Vec<u32> = (0..n).map(|_| rng.next_u32() % n.max(1) as u32).collect();
        if n > 0 {
            let gathered = segment::gather_u32(&input, &upload(&indices)).unwrap();
            assert_same(
                "gather",
                n,
                &gathered.download().unwrap(),
                &cpu::gather_u32(&values, &indices),
            );
        }

        let (start, end) = segment::find_sorted_bounds(&upload(&sorted_owner), segments).unwrap();
        let (expected_start, expected_end) = cpu::find_sorted_bounds(&sorted_owner, segments);
        assert_same(
            "sorted bounds start",
            n,
            &start.download().unwrap(),
            &expected_start,
        );
        assert_same(
            "sorted bounds end",
            n,
            &end.download().unwrap(),
            &expected_end,
        );

        // Node ranges with empty nodes among them, chunked by 4 and by 1000.
        let nodes = 1 + n / 100;
        let sizes: Vec<u32> = (0..nodes)
            .map(|_| rng.next_u32() % 3000 * u32::from(rng.next_f32() < 0.8))
            .collect();
        let (starts, _) = cpu::scan_u32(&sizes, ScanKind::Exclusive, Direction::Forward);
        for chunk in [4, 1000] {
            let chunks = segment::create_chunks(&upload(&starts), &upload(&sizes), chunk).unwrap();
            let (owner, start, size) = cpu::create_chunks(&starts, &sizes, chunk);
            let what = format!("chunks of {chunk}, {nodes} nodes");
            assert_same(&what, n, &chunks.owner.download().unwrap(), &owner);
            assert_same(&what, n, &chunks.start.download().unwrap(), &start);
            assert_same(&what, n, &chunks.size.download().unwrap(), &size);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn scan_of_2_pow_28() {
    let mut rng = rng("scan_of_2_pow_28");
    let n = 1 << 28;
    let values = random_u32(&mut rng, n);
    let input = upload(&values);
    let mut output = poisoned(n);
    scan::exclusive_u32(&input, &mut output).unwrap();
    let (expected, _) = cpu::scan_u32(&values, ScanKind::Exclusive, Direction::Forward);
    assert_same("exclusive scan", n, &output.download().unwrap(), &expected);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn radix_sort_of_2_pow_28_pairs() {
    let mut rng = rng("radix_sort_of_2_pow_28_pairs");
    let n = 1 << 28;
    let keys = random_u32(&mut rng, n);
    let mut key_buffer = upload(&keys);
    let mut value_buffer = upload(&(0..n as u32).collect::<Vec<_>>());
    radix_sort::sort_pairs(&mut key_buffer, &mut value_buffer).unwrap();
    let (sorted, permutation) = (
        key_buffer.download().unwrap(),
        value_buffer.download().unwrap(),
    );
    if let Err(why) = cpu::verify_stable_sort(&keys, &sorted, &permutation) {
        panic!("2^28 u32 pairs: {why}");
    }
}
