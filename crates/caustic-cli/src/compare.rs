//! `caustic compare`: image metrics between two images, in linear values.

use crate::notes;
use anyhow::{Context, Result, bail};
use caustic_render::{Film, image_io};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args)]
#[command(
    after_help = "Examples:\n  caustic compare cb.exr reference.exr --block 8\n  \
    caustic compare cb.png reference.png   # sRGB PNGs, compared as linear values"
)]
pub struct CompareArgs {
    /// Image to check: .exr (linear) or .png (sRGB, converted to linear).
    image: PathBuf,
    /// Reference image of the same size: .exr or .png.
    reference: PathBuf,
    /// Also print the RMSE of BLOCK x BLOCK block means (low-frequency
    /// error, apart from per-pixel noise).
    #[arg(long, value_name = "BLOCK", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    block: Option<u32>,
}

pub fn run(args: CompareArgs) -> Result<()> {
    let image = read(&args.image)?;
    let reference = read(&args.reference)?;
    let rmse = image_io::rmse(&image, &reference)?;
    let psnr = image_io::psnr(&image, &reference, 1.0)?;
    let (m, r) = (image.mean(), reference.mean());
    println!("rmse_linear {rmse:.6}");
    println!("psnr_db     {psnr:.2} (peak 1.0)");
    if let Some(block) = args.block {
        if block > image.width.min(image.height) {
            bail!(
                "--block {block} is larger than the image's smaller side ({})",
                image.width.min(image.height)
            );
        }
        let down = |f| image_io::downsample(f, block);
        let rmse = image_io::rmse(&down(&image), &down(&reference))?;
        println!("rmse_block{block} {rmse:.6}");
    }
    println!(
        "mean        ({:.5}, {:.5}, {:.5}) vs reference ({:.5}, {:.5}, {:.5})",
        m.x, m.y, m.z, r.x, r.y, r.z
    );
    Ok(())
}

/// Reads an EXR or PNG as linear values, saying so for a PNG: its 8-bit
/// sRGB values were clipped at 1 when written, so bright areas compare low.
fn read(path: &Path) -> Result<Film> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if !matches!(ext.as_deref(), Some("exr" | "png")) || path.is_dir() {
        bail!(
            "{}: not an image compare reads: it reads .exr (linear) and .png (sRGB) files",
            path.display()
        );
    }
    let film =
        image_io::read_image(path).with_context(|| format!("cannot read {}", path.display()))?;
    if ext.as_deref() == Some("png") {
        notes::note(format!(
            "{}: PNG, converted from 8-bit sRGB to linear (values above 1 were clipped when it was written; EXR compares exactly)",
            path.display()
        ));
    }
    Ok(film)
}
