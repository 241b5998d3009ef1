//! The engine's figures in the Prometheus text format ([`crate::Engine::metrics`]): jobs by
//! state, the queue's depth, histograms of each stage's device milliseconds, the GPU locks'
//! held time and the staging time, upload bytes and speed, VRAM and pinned memory in use and
//! at their high-water marks, quarantined devices.

use std::fmt::Write;

use crate::stats::{EngineStats, StageHistograms, BUCKETS_MS};

/// What the text is made from: the stats, the queue's depth, the histograms.
pub(crate) fn render(st: &EngineStats, queued: u64, stages: &StageHistograms) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(out, "{name}{labels} {v}");
        }
    };
    let plain = |v: f64| vec![(String::new(), v)];
    let jobs: Vec<(String, f64)> = [
        ("submitted", st.submitted),
        ("done", st.done),
        ("failed", st.failed),
        ("cancelled", st.cancelled),
        ("rejected", st.rejected),
    ]
    .iter()
    .map(|(s, v)| (format!("{{state=\"{s}\"}}"), *v as f64))
    .collect();
    metric("zkpipe_jobs_total", "counter", "Jobs by state.", &jobs);
    metric(
        "zkpipe_jobs_moved_off_quarantined_total",
        "counter",
        "Jobs a quarantined device's workers put back in the queue for another device.",
        &plain(st.moved_off_quarantined as f64),
    );
    metric(
        "zkpipe_queue_depth",
        "gauge",
        "Jobs accepted and not yet taken by a worker.",
        &plain(queued as f64),
    );
    metric(
        "zkpipe_upload_bytes_total",
        "counter",
        "Bytes of witness staged on the devices (streamed key points not counted).",
        &plain(st.uploaded_bytes as f64),
    );
    metric(
        "zkpipe_bases_streamed_bytes_total",
        "counter",
        "Bytes of key points streamed to the devices during MSMs (keys not resident).",
        &plain(st.bases_streamed_bytes as f64),
    );
    metric(
        "zkpipe_link_busy_seconds_total",
        "counter",
        "Device seconds during which a copy of streamed key points ran (jobs added up).",
        &plain(st.link_busy_ms / 1e3),
    );
    metric(
        "zkpipe_gpu_lock_seconds_total",
        "counter",
        "Seconds jobs held their device's GPU lock (devices added up): its rate over the \
         devices is how busy the workers keep them, and a rate short of it while jobs wait \
         says the host does not feed them.",
        &plain(st.gpu_lock_ms / 1e3),
    );
    metric(
        "zkpipe_staging_seconds_total",
        "counter",
        "Host seconds jobs spent staging their uploads outside the GPU lock.",
        &plain(st.staging_ms / 1e3),
    );
    metric(
        "zkpipe_resident_uploads_total",
        "counter",
        "Keys and recordings uploaded to stay resident on a device.",
        &plain(st.resident_uploads as f64),
    );
    metric(
        "zkpipe_resident_evictions_total",
        "counter",
        "Resident keys and recordings given up to leave a job of another key its plan.",
        &plain(st.resident_evictions as f64),
    );
    metric(
        "zkpipe_upload_gbps",
        "gauge",
        "Host-to-device speed of the uploads so far (GB/s).",
        &plain(st.upload_gbps),
    );
    let bytes = [
        (
            "zkpipe_vram_high_water_bytes",
            "Device memory in use at most, measured (all devices).",
            st.vram_high_water,
        ),
        (
            "zkpipe_vram_budget_high_water_bytes",
            "The most the VRAM budgets granted at once.",
            st.vram_budget_high_water,
        ),
        (
            "zkpipe_vram_budget_in_use_bytes",
            "What the VRAM budgets grant now.",
            st.vram_budget_in_use,
        ),
        (
            "zkpipe_vram_kept_bytes",
            "Of the budget in use, what is kept between jobs: resident keys and recordings, workers' tables and job memory.",
            st.vram_kept,
        ),
        (
            "zkpipe_pinned_high_water_bytes",
            "The most pinned staging and lent witness memory out at once.",
            st.pinned_high_water,
        ),
        (
            "zkpipe_pinned_in_use_bytes",
            "Pinned staging and lent witness memory out now.",
            st.pinned_in_use,
        ),
        (
            "zkpipe_quarantined_devices",
            "Devices quarantined after a fault.",
            st.quarantined_devices,
        ),
    ];
    for (name, help, v) in bytes {
        metric(name, "gauge", help, &plain(v as f64));
    }
    let name = "zkpipe_stage_device_ms";
    let _ = writeln!(
        out,
        "# HELP {name} Device milliseconds of each stage of a job (CUDA events); stage \"job\" is the job's whole device span."
    );
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (stage, h) in stages.snapshot() {
        let mut cumulative = 0;
        for (bound, n) in BUCKETS_MS.iter().zip(h.buckets) {
            cumulative += n;
            let _ = writeln!(
                out,
                "{name}_bucket{{stage=\"{stage}\",le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{stage=\"{stage}\",le=\"+Inf\"}} {}",
            h.count
        );
        let _ = writeln!(out, "{name}_sum{{stage=\"{stage}\"}} {}", h.sum);
        let _ = writeln!(out, "{name}_count{{stage=\"{stage}\"}} {}", h.count);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Stage, StageTime};

    #[test]
    fn histograms_are_cumulative_and_count_every_observation() {
        let h = StageHistograms::default();
        let t = |stage, ms| StageTime { stage, ms };
        h.observe(&[t(Stage::HStep, 3.0), t(Stage::MsmH, 900.0)], 1200.0);
        h.observe(&[t(Stage::HStep, 300.0)], 0.0);
        h.observe(&[t(Stage::HStep, 20000.0)], 0.0);
        let st = EngineStats {
            moved_off_quarantined: 3,
            bases_streamed_bytes: 46_000_000_000,
            link_busy_ms: 1500.0,
            gpu_lock_ms: 93_250.0,
            staging_ms: 12_500.0,
            ..EngineStats::default()
        };
        let text = render(&st, 2, &h);
        assert!(text.contains("zkpipe_stage_device_ms_bucket{stage=\"h_step\",le=\"5\"} 1\n"));
        assert!(text.contains("zkpipe_stage_device_ms_bucket{stage=\"h_step\",le=\"500\"} 2\n"));
        assert!(text.contains("zkpipe_stage_device_ms_bucket{stage=\"h_step\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("zkpipe_stage_device_ms_sum{stage=\"h_step\"} 20303\n"));
        assert!(text.contains("zkpipe_stage_device_ms_count{stage=\"job\"} 1\n"));
        assert!(text.contains("zkpipe_queue_depth 2\n"));
        assert!(text.contains("zkpipe_jobs_moved_off_quarantined_total 3\n"));
        assert!(text.contains("zkpipe_bases_streamed_bytes_total 46000000000\n"));
        assert!(text.contains("zkpipe_link_busy_seconds_total 1.5\n"));
        assert!(text.contains("zkpipe_gpu_lock_seconds_total 93.25\n"));
        assert!(text.contains("zkpipe_staging_seconds_total 12.5\n"));
        // Every sample line is `name{labels} value` with a number for the value.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').expect("a sample has a value");
            assert!(value.parse::<f64>().is_ok(), "{line}");
            assert!(name.starts_with("zkpipe_"), "{line}");
        }
    }
}
