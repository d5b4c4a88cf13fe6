//! `caustic compare`: image metrics between two EXR files.

use anyhow::{Context, Result};
use caustic_render::image_io;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
#[command(
    after_help = "Example:\n  caustic compare cb.exr ../shared/refs/cornell-box/cornell-box_whitted.exr"
)]
pub struct CompareArgs {
    /// Image to check (linear EXR).
    image: PathBuf,
    /// Reference image (linear EXR) of the same size.
    reference: PathBuf,
    /// Also print the RMSE of BLOCK x BLOCK block means (low-frequency
    /// error, apart from per-pixel noise).
    #[arg(long, value_name = "BLOCK")]
    block: Option<u32>,
}

pub fn run(args: CompareArgs) -> Result<()> {
    let read =
        |p: &PathBuf| image_io::read_exr(p).with_context(|| format!("cannot read {}", p.display()));
    let image = read(&args.image)?;
    let reference = read(&args.reference)?;
    let rmse = image_io::rmse(&image, &reference)?;
    let psnr = image_io::psnr(&image, &reference, 1.0)?;
    let (m, r) = (image.mean(), reference.mean());
    println!("rmse_linear {rmse:.6}");
    println!("psnr_db     {psnr:.2} (peak 1.0)");
    if let Some(block) = args.block {
        if block == 0 || block > image.width.min(image.height) {
            anyhow::bail!("--block must be between 1 and the image's smaller side");
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
