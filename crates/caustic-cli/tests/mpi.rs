//! `mpirun -np N caustic render …` (feature `mpi`): the ranks share the
//! render and rank 0 writes the image a single process writes, bit for bit;
//! a rank that dies ends the job with an error naming it, never a hang.
//!
//! Needs Open MPI's `mpirun` (Debian's openmpi-bin, which `.ci/run`
//! installs): under CI its absence fails the tests, elsewhere they skip.

use caustic_render::image_io::read_image;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CAUSTIC: &str = env!("CARGO_BIN_EXE_caustic");

/// `mpirun`, or `None` after saying the test skips (outside CI).
fn mpirun() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("mpirun"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let under_ci = std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"));
        assert!(
            !under_ci,
            "mpirun is missing: install Debian's openmpi-bin (.ci/run does)"
        );
        eprintln!("skipping: mpirun is not installed (Debian's openmpi-bin)");
    }
    found
}

/// An `mpirun` of `ranks` processes of `caustic ARGS` in `dir`: run as root
/// where CI runs as root, more ranks than cores allowed.
fn mpirun_command(mpirun: &Path, ranks: u32, dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(mpirun);
    command
        .args(["--oversubscribe", "-np", &ranks.to_string(), CAUSTIC])
        .args(args)
        .current_dir(dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    command
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("caustic-mpi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn check(output: Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Renders with one process and with teams of 2 and 3 ranks, and compares
/// the images' pixel bits.
fn team_renders_equal(integrator: &str, extra: &[&str]) {
    let Some(mpirun) = mpirun() else { return };
    let dir = temp_dir(integrator);
    let mut args = vec![
        "render",
        "cornell-caustics",
        "--integrator",
        integrator,
        "--width",
        "40",
        "--height",
        "30",
        "--device",
        "cpu",
        "-q",
    ];
    args.extend_from_slice(extra);
    let single = Command::new(CAUSTIC)
        .args(&args)
        .args(["-o", "single.exr"])
        .current_dir(&dir)
        .output()
        .unwrap();
    check(single, "the single-process render");
    let reference = read_image(&dir.join("single.exr")).unwrap();
    assert!(reference.mean().length() > 0.0, "the image is not black");
    for ranks in [2, 3] {
        let name = format!("team{ranks}.exr");
        let out = mpirun_command(&mpirun, ranks, &dir, &args)
            .args(["-o", &name])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        check(out, &format!("mpirun -np {ranks}"));
        let team = read_image(&dir.join(&name)).unwrap();
        let differing = team.pixels_differing_from(&reference);
        assert_eq!(
            differing, 0,
            "{integrator}, {ranks} ranks: {differing} pixels differ from the single process's\n{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sppm_ranks_render_the_single_process_image() {
    team_renders_equal("sppm", &["--passes", "3"]);
}

#[test]
fn photon_ranks_render_the_single_process_image() {
    team_renders_equal("photon", &[]);
}

#[test]
fn whitted_ranks_render_the_single_process_image() {
    team_renders_equal("whitted", &["--spp", "4"]);
}

/// An animation's frames dealt among 2 and 3 ranks (rank r renders frames
/// r, r + N, …, each alone, and writes them) are the single process's
/// frames, bit for bit, every frame written once.
#[test]
fn ranks_deal_out_an_animations_frames() {
    let Some(mpirun) = mpirun() else { return };
    let dir = temp_dir("frames");
    let args = [
        "render",
        "cornell-caustics-moving",
        "--integrator",
        "photon",
        "--spp",
        "1",
        "--width",
        "32",
        "--height",
        "24",
        "--frames",
        "0..4",
        "--device",
        "cpu",
        "-q",
    ];
    let single = Command::new(CAUSTIC)
        .args(args)
        .args(["-o", "single_%02d.exr"])
        .current_dir(&dir)
        .output()
        .unwrap();
    check(single, "the single-process animation");
    for ranks in [2, 3] {
        let pattern = format!("team{ranks}_%02d.exr");
        let out = mpirun_command(&mpirun, ranks, &dir, &args)
            .args(["-o", &pattern])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        check(out, &format!("mpirun -np {ranks}"));
        assert!(
            stderr.contains("5 frames in") && stderr.contains(&format!("dealt over {ranks} ranks")),
            "{stderr}"
        );
        for frame in 0..5 {
            let reference = read_image(&dir.join(format!("single_{frame:02}.exr"))).unwrap();
            let dealt = read_image(&dir.join(format!("team{ranks}_{frame:02}.exr"))).unwrap();
            assert!(reference.mean().length() > 0.0, "frame {frame} is black");
            let differing = dealt.pixels_differing_from(&reference);
            assert_eq!(
                differing, 0,
                "{ranks} ranks, frame {frame}: {differing} pixels differ\n{stderr}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The pids of the running processes whose environment holds `marker`
/// and `OMPI_COMM_WORLD_RANK=rank`.
fn rank_pids(marker: &str, rank: u32) -> Vec<u32> {
    let wanted = format!("OMPI_COMM_WORLD_RANK={rank}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            let vars: Vec<&[u8]> = environ.split(|&b| b == 0).collect();
            vars.contains(&marker.as_bytes()) && vars.contains(&wanted.as_bytes())
        })
        .collect()
}

#[test]
fn a_killed_rank_ends_the_job_with_an_error() {
    let Some(mpirun) = mpirun() else { return };
    let dir = temp_dir("kill");
    let marker = format!("CAUSTIC_MPI_TEST={}", std::process::id());
    // Far more passes than the test waits for.
    let args = [
        "render",
        "cornell-caustics",
        "--integrator",
        "sppm",
        "--width",
        "32",
        "--height",
        "32",
        "--passes",
        "100000",
        "--device",
        "cpu",
        "-o",
        "never.exr",
    ];
    let (key, value) = marker.split_once('=').unwrap();
    let mut job = mpirun_command(&mpirun, 2, &dir, &args)
        .env(key, value)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let victim = loop {
        if let Some(&pid) = rank_pids(&marker, 1).first() {
            break pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "rank 1 never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // Let the render get going, then kill rank 1 as a crash would.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(job.try_wait().unwrap().is_none(), "the job ended early");
    // SAFETY: kill(2) on a pid this test found; a stale pid only fails.
    unsafe { libc::kill(victim as i32, libc::SIGKILL) };
    let killed = Instant::now();
    let status = loop {
        if let Some(status) = job.try_wait().unwrap() {
            break status;
        }
        if killed.elapsed() > Duration::from_secs(60) {
            let _ = job.kill();
            panic!("the job still runs 60 s after rank 1 was killed: a hang");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    job.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "the job must fail\n{stderr}");
    assert!(
        stderr.contains("rank 1"),
        "the error must name the rank that died:\n{stderr}"
    );
    assert!(
        !dir.join("never.exr").exists(),
        "no image from a failed job"
    );
    assert!(
        rank_pids(&marker, 0).is_empty(),
        "rank 0 must not outlive the job"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
