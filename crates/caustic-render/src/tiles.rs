//! Image tiles in Morton (Z-curve) order: neighbouring tiles are traced
//! close in time, so their rays touch the same parts of the scene while
//! those are in cache.

/// A rectangle of pixels `[x0, x1) × [y0, y1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub x0: u32,
    pub y0: u32,
    pub x1: u32,
    pub y1: u32,
}

impl Tile {
    pub fn pixel_count(&self) -> usize {
        ((self.x1 - self.x0) * (self.y1 - self.y0)) as usize
    }
}

/// Interleaves the low 16 bits of `x` and `y` (x in the even bits).
pub fn morton2(x: u32, y: u32) -> u32 {
    fn spread(mut v: u32) -> u32 {
        v &= 0xffff;
        v = (v | (v << 8)) & 0x00ff_00ff;
        v = (v | (v << 4)) & 0x0f0f_0f0f;
        v = (v | (v << 2)) & 0x3333_3333;
        (v | (v << 1)) & 0x5555_5555
    }
    spread(x) | (spread(y) << 1)
}

/// The tiles of `size × size` pixels covering a `width × height` image,
/// clipped at the borders, in Morton order of their tile coordinates.
pub fn morton_tiles(width: u32, height: u32, size: u32) -> Vec<Tile> {
    let size = size.max(1);
    let (nx, ny) = (width.div_ceil(size), height.div_ceil(size));
    let mut tiles: Vec<(u32, Tile)> = (0..ny)
        .flat_map(|ty| (0..nx).map(move |tx| (tx, ty)))
        .map(|(tx, ty)| {
            let tile = Tile {
                x0: tx * size,
                y0: ty * size,
                x1: ((tx + 1) * size).min(width),
                y1: ((ty + 1) * size).min(height),
            };
            (morton2(tx, ty), tile)
        })
        .collect();
    tiles.sort_unstable_by_key(|(code, _)| *code);
    tiles.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_every_pixel_once() {
        for (w, h) in [(1, 1), (17, 9), (64, 64), (100, 37)] {
            let mut seen = vec![0u8; (w * h) as usize];
            for t in morton_tiles(w, h, 8) {
                for y in t.y0..t.y1 {
                    for x in t.x0..t.x1 {
                        seen[(y * w + x) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{w}x{h}");
        }
    }

    #[test]
    fn morton_order_starts_with_a_z() {
        let tiles = morton_tiles(16, 16, 8);
        let origins: Vec<_> = tiles.iter().map(|t| (t.x0, t.y0)).collect();
        assert_eq!(origins, [(0, 0), (8, 0), (0, 8), (8, 8)]);
    }
}
