//! The dependency plan of a DACRT task's seven children on the GPU task
//! pool: Vinkler, Bittner, Havran and Hapala 2013, §5.3, and the look-up
//! table it keys by which ray and triangle classes are empty.
//!
//! A task partitions its rays and triangles into left, straddling and
//! right ([L | S | R] ranges of the two index arrays) and makes a child
//! for every class pair but (L rays, R triangles) and (R rays, L
//! triangles), which cannot meet (Figure 3):
//!
//! | | tris L | tris S | tris R |
//! |---|---|---|---|
//! | rays L | T1 | T2 | — |
//! | rays S | T3 | T4 | T5 |
//! | rays R | — | T6 | T7 |
//!
//! Two children that share a ray class or a triangle class reorder the
//! same index range, so one must finish (its whole subtree) before the
//! other starts. The paper orders them in three waves, (T1, T4, T7) →
//! (T2, T3) → (T5, T6), with the edges T1→T2, T1→T3, T4→T2, T4→T3,
//! T7→T5, T7→T6, T3→T5, T2→T6; the last wave inherits the parent's own
//! activation targets (what the parent would have notified on finishing).
//! A child whose ray or triangle range is empty is not created; the plan
//! of the others then needs edges through the missing ones. [`plan`]
//! computes it for every pattern of empty classes: each present child
//! waits for the present children of earlier waves it conflicts with,
//! transitively reduced, so every task activates at most two others (the
//! pool's limit) and the children without successors (at most two) hand
//! on the parent's targets. Those targets then wait for that many
//! finishers instead of one, so the parent adds `sinks - 1` to their
//! pending counts before it stores any child.
//!
//! The CPU ([`super::task`]) runs the same children wave by wave, a
//! coarser order that satisfies the same edges, and reports the plan's
//! critical path ([`critical_path`]).

use super::task::Side;

/// The class pair (rays, triangles) of children T1..T7.
pub(super) const CHILDREN: [(Side, Side); 7] = [
    (Side::Left, Side::Left),
    (Side::Left, Side::Both),
    (Side::Both, Side::Left),
    (Side::Both, Side::Both),
    (Side::Both, Side::Right),
    (Side::Right, Side::Both),
    (Side::Right, Side::Right),
];

/// The dependency wave of T1..T7 (0, 1, 2).
const WAVE: [u8; 7] = [0, 1, 1, 0, 2, 2, 0];

/// Whom a child notifies when it (and its subtree) has finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Successor {
    /// A sibling, by index 0..7 (T1..T7).
    Child(u8),
    /// The parent's activation targets, both of them.
    Parent,
}

/// One child's part in a plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ChildPlan {
    pub present: bool,
    /// Present siblings it waits for.
    pub waits: u8,
    /// Its successors: up to two siblings, or the parent's targets.
    pub successors: [Option<Successor>; 2],
}

/// The plan of the children for the classes that are not empty: bit `c`
/// of `mask` for ray class `c` (0 left, 1 straddling, 2 right), bit
/// `3 + c` for triangle class `c`.
pub(super) fn plan(mask: u8) -> [ChildPlan; 7] {
    let present: [bool; 7] = std::array::from_fn(|i| {
        let (rays, tris) = CHILDREN[i];
        mask & (1 << rays as u8) != 0 && mask & (8 << tris as u8) != 0
    });
    let conflict =
        |a: usize, b: usize| CHILDREN[a].0 == CHILDREN[b].0 || CHILDREN[a].1 == CHILDREN[b].1;
    // Predecessors (conflicting present children of earlier waves) and
    // ancestors (their transitive closure), as bit sets, wave by wave.
    let mut preds = [0u8; 7];
    let mut ancestors = [0u8; 7];
    for wave in 0..3 {
        for y in (0..7).filter(|&y| present[y] && WAVE[y] == wave) {
            for x in (0..7).filter(|&x| present[x] && WAVE[x] < wave && conflict(x, y)) {
                preds[y] |= 1 << x;
                ancestors[y] |= (1 << x) | ancestors[x];
            }
        }
    }
    let mut plans = [ChildPlan::default(); 7];
    for y in 0..7 {
        plans[y].present = present[y];
        // A predecessor another predecessor already waits for is implied.
        let direct: Vec<usize> = (0..7)
            .filter(|&x| preds[y] & (1 << x) != 0)
            .filter(|&x| {
                (0..7).all(|z| z == x || preds[y] & (1 << z) == 0 || ancestors[z] & (1 << x) == 0)
            })
            .collect();
        plans[y].waits = direct.len() as u8;
        for x in direct {
            let slot = plans[x].successors.iter().position(Option::is_none);
            // Out-degrees are at most two: the tests check every mask.
            if let Some(slot) = slot {
                plans[x].successors[slot] = Some(Successor::Child(y as u8));
            }
        }
    }
    for p in plans
        .iter_mut()
        .filter(|p| p.present && p.successors[0].is_none())
    {
        p.successors = [Some(Successor::Parent), None];
    }
    plans
}

/// The longest chain of a task's children under [`plan`]`(mask)`, child
/// `i`'s own chain being `lengths[i]` tasks: how many tasks run one after
/// another below the parent however many processors there are.
pub(super) fn critical_path(mask: u8, lengths: [u64; 7]) -> u64 {
    let plans = plan(mask);
    let mut finish = [0u64; 7];
    // Waves in order: every predecessor finishes before its successors.
    for wave in 0..3 {
        for c in (0..7).filter(|&c| plans[c].present && WAVE[c] == wave) {
            let start = (0..7)
                .filter(|&p| {
                    plans[p]
                        .successors
                        .contains(&Some(Successor::Child(c as u8)))
                })
                .map(|p| finish[p])
                .max()
                .unwrap_or(0);
            finish[c] = start + lengths[c];
        }
    }
    finish.into_iter().max().unwrap_or(0)
}

/// Words per mask in [`device_table`]: one per child, then the count of
/// children that inherit the parent's targets.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(super) const TABLE_WORDS: usize = 8;

/// The look-up table the GPU's subdivision reads (`dacrt/taskpool.cu`),
/// [`TABLE_WORDS`] words per mask. A child's word: bit 0 present, bits 1..4
/// the number it waits for, bits 4..8 and 8..12 its successors (0..7 a
/// sibling, 14 the parent's targets, 15 none). Word 7: how many children
/// hand on the parent's targets.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(super) fn device_table() -> Vec<u32> {
    let code = |s: Option<Successor>| match s {
        Some(Successor::Child(c)) => u32::from(c),
        Some(Successor::Parent) => 14,
        None => 15,
    };
    let mut table = Vec::with_capacity(64 * TABLE_WORDS);
    for mask in 0..64u8 {
        let plans = plan(mask);
        for p in &plans {
            table.push(
                u32::from(p.present)
                    | u32::from(p.waits) << 1
                    | code(p.successors[0]) << 4
                    | code(p.successors[1]) << 8,
            );
        }
        let sinks = plans
            .iter()
            .filter(|p| p.successors[0] == Some(Successor::Parent))
            .count();
        table.push(sinks as u32);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `b` runs only after `a` has finished in `plans`.
    fn after(plans: &[ChildPlan; 7], a: usize, b: usize) -> bool {
        plans[a].successors.iter().flatten().any(|s| match *s {
            Successor::Child(c) => c as usize == b || after(plans, c as usize, b),
            Successor::Parent => false,
        })
    }

    #[test]
    fn the_full_plan_is_the_papers() {
        let plans = plan(0b111_111);
        let child = |c: u8| Some(Successor::Child(c));
        let edges = |i: usize| plans[i].successors;
        assert_eq!(edges(0), [child(1), child(2)]);
        assert_eq!(edges(3), [child(1), child(2)]);
        assert_eq!(edges(6), [child(4), child(5)]);
        assert_eq!(edges(2), [child(4), None]);
        assert_eq!(edges(1), [child(5), None]);
        assert_eq!(edges(4), [Some(Successor::Parent), None]);
        assert_eq!(edges(5), [Some(Successor::Parent), None]);
        let waits: Vec<u8> = plans.iter().map(|p| p.waits).collect();
        assert_eq!(waits, [0, 2, 2, 0, 2, 2, 0]);
    }

    #[test]
    fn the_critical_path_follows_the_waves() {
        // Every child one task long: T1 -> T2 -> T6 is three.
        assert_eq!(critical_path(0b111_111, [1; 7]), 3);
        // Rays and triangles only left and right: T1 and T7 side by side.
        assert_eq!(critical_path(0b101_101, [5, 0, 0, 0, 0, 0, 4]), 5);
        // T3 long: T1 (or T4), T3, T5.
        assert_eq!(critical_path(0b111_111, [1, 1, 10, 1, 1, 1, 1]), 12);
    }

    #[test]
    fn every_pattern_orders_every_conflict_within_the_pools_limits() {
        let table = device_table();
        assert_eq!(table.len(), 64 * TABLE_WORDS);
        for mask in 0..64u8 {
            let plans = plan(mask);
            let present: Vec<usize> = (0..7).filter(|&i| plans[i].present).collect();
            for &i in &present {
                let (rays, tris) = CHILDREN[i];
                assert!(mask & (1 << rays as u8) != 0 && mask & (8 << tris as u8) != 0);
            }
            // Every pair that shares a range is ordered (others may be
            // too, through a third child, as in the paper's full plan).
            for &a in &present {
                for &b in present.iter().filter(|&&b| b > a) {
                    let shares = CHILDREN[a].0 == CHILDREN[b].0 || CHILDREN[a].1 == CHILDREN[b].1;
                    let ordered = after(&plans, a, b) || after(&plans, b, a);
                    assert!(
                        !shares || ordered,
                        "mask {mask:06b}: T{} and T{}",
                        a + 1,
                        b + 1
                    );
                    assert!(!(after(&plans, a, b) && after(&plans, b, a)));
                }
            }
            // Waits count the edges in; every successor is present; the
            // children that hand on the parent's targets are those with no
            // sibling after them, at most two, and every child runs before
            // one of them.
            let sinks: Vec<usize> = present
                .iter()
                .copied()
                .filter(|&i| plans[i].successors[0] == Some(Successor::Parent))
                .collect();
            assert!(
                present.is_empty() || (1..=2).contains(&sinks.len()),
                "mask {mask:06b}"
            );
            for &i in &present {
                let incoming = present
                    .iter()
                    .filter(|&&x| {
                        plans[x]
                            .successors
                            .contains(&Some(Successor::Child(i as u8)))
                    })
                    .count();
                assert_eq!(incoming, plans[i].waits as usize);
                for s in plans[i].successors.iter().flatten() {
                    if let Successor::Child(c) = *s {
                        assert!(plans[c as usize].present);
                    }
                }
                assert!(sinks.contains(&i) || sinks.iter().any(|&s| after(&plans, i, s)));
            }
            // At least one child starts at once, and the table says the same.
            assert!(present.is_empty() || present.iter().any(|&i| plans[i].waits == 0));
            let words = &table[mask as usize * TABLE_WORDS..][..TABLE_WORDS];
            assert_eq!(words[7] as usize, sinks.len());
            for (i, p) in plans.iter().enumerate() {
                assert_eq!(words[i] & 1 == 1, p.present);
                assert_eq!((words[i] >> 1) & 7, u32::from(p.waits));
            }
        }
    }
}
