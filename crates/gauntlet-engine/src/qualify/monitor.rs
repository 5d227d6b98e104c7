//! The resource monitor behind R6: samples the server's health, RSS and GPU memory on its own thread from R0's
//! readiness to the end of R5. Never stops the server and never blocks a stage.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{MONITOR_FILE, drift};
use crate::client::Client;
use crate::manifest::Profile;
use crate::util::now_rfc3339;

/// Samples the server through every stage on its own thread (and its own runtime, so a busy stage cannot delay a
/// reading), appending one JSON line per sample so a killed run keeps what was seen.
pub(super) struct Monitor {
    stop: mpsc::Sender<()>,
    handle: std::thread::JoinHandle<usize>,
}

impl Monitor {
    pub(super) fn start(
        profile: &Profile,
        dir: &Path,
        base_url: &str,
        api_key: Option<String>,
        pid: Option<u32>,
        clock: Instant,
    ) -> Monitor {
        let (stop, stopped) = mpsc::channel::<()>();
        let profile = profile.clone();
        let path = dir.join(MONITOR_FILE);
        let base_url = base_url.to_owned();
        let handle = std::thread::spawn(move || {
            use std::io::Write as _;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            let client = Client::new(&base_url, api_key);
            let Ok(mut file) = crate::util::bounded::append(&path) else { return 0 };
            // One GPU probe (one NVML handle) for the monitor's life.
            let probe = crate::sentry::gpu::probe();
            let every = Duration::from_secs_f64(profile.qualify.monitor_interval_seconds);
            let mut taken = 0;
            loop {
                let t = clock.elapsed().as_secs_f64();
                let at = now_rfc3339();
                let sent = Instant::now();
                let health = rt.block_on(client.health(&profile.health_path, Duration::from_secs(5)));
                let health_seconds = sent.elapsed().as_secs_f64();
                let (health_ok, error) = match health {
                    Ok(200) => (true, None),
                    Ok(code) => (false, Some(format!("health answered HTTP {code}"))),
                    Err(e) => (false, Some(e.to_string())),
                };
                let gpu_memory_bytes = match pid {
                    Some(pid) if profile.device.is_gpu() => {
                        crate::session::server_on_gpu(&profile, probe.as_ref(), pid).1
                    }
                    _ => None,
                };
                let sample = drift::Sample {
                    t,
                    at,
                    rss_bytes: pid.and_then(|p| drift::group_rss_bytes(p as i32)),
                    health_ok,
                    health_seconds: health_ok.then_some(health_seconds),
                    gpu_memory_bytes,
                    error,
                };
                let mut line = serde_json::to_vec(&sample).expect("serializable");
                line.push(b'\n');
                if file.write_all(&line).and_then(|_| file.flush()).is_ok() {
                    taken += 1;
                }
                match stopped.recv_timeout(every.saturating_sub(sent.elapsed())) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    _ => break,
                }
            }
            taken
        });
        Monitor { stop, handle }
    }

    /// Stops sampling; returns how many samples were written.
    pub(super) fn stop(self) -> usize {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or(0)
    }
}
