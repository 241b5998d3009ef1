//! The daemon's figures in the Prometheus text format (GetMetrics and HTTP `/metrics`), ahead
//! of the engine's own (`zkpipe_pipeline::Engine::metrics`). The daemon's names begin with
//! `zkpipe_serve_`.

use std::fmt::Write;

use zkpipe_filecoin::KeyTier;

use crate::daemon::{Counts, Histogram, Status, LATENCY_BUCKETS_S};

/// One metric's samples: label text (`{…}` or empty) and value.
type Samples = Vec<(String, f64)>;

fn metric(out: &mut String, name: &str, kind: &str, help: &str, samples: &Samples) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{labels} {v}");
    }
}

fn plain(v: f64) -> Samples {
    vec![(String::new(), v)]
}

fn outcomes(kind: &str, c: &Counts) -> Samples {
    [
        ("completed", c.completed),
        ("failed", c.failed),
        ("cancelled", c.cancelled),
        ("expired", c.expired),
    ]
    .iter()
    .map(|(outcome, n)| {
        (
            format!("{{kind=\"{kind}\",outcome=\"{outcome}\"}}"),
            *n as f64,
        )
    })
    .collect()
}

/// A histogram's lines for one kind: cumulative buckets, then the sum and the count.
fn histogram(out: &mut String, name: &str, kind: &str, h: &Histogram) {
    let mut cumulative = 0;
    for (i, n) in h.buckets.iter().enumerate() {
        cumulative += n;
        let le = LATENCY_BUCKETS_S
            .get(i)
            .map_or("+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(
            out,
            "{name}_bucket{{kind=\"{kind}\",le=\"{le}\"}} {cumulative}"
        );
    }
    let _ = writeln!(out, "{name}_sum{{kind=\"{kind}\"}} {}", h.sum);
    let _ = writeln!(out, "{name}_count{{kind=\"{kind}\"}} {}", h.count);
}

/// The daemon's part of the metrics text.
pub(crate) fn render(st: &Status) -> String {
    let mut out = String::new();
    metric(
        &mut out,
        "zkpipe_serve_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        &plain(st.uptime_s),
    );
    metric(
        &mut out,
        "zkpipe_serve_workers",
        "gauge",
        "Jobs the daemon proves at once.",
        &plain(st.workers as f64),
    );
    metric(
        &mut out,
        "zkpipe_serve_jobs_running",
        "gauge",
        "Jobs being proved now.",
        &plain(st.running as f64),
    );
    let pending: Samples = st
        .pending
        .iter()
        .map(|(p, n)| (format!("{{priority=\"{}\"}}", p.name()), *n as f64))
        .collect();
    metric(
        &mut out,
        "zkpipe_serve_jobs_pending",
        "gauge",
        "Jobs waiting, by priority.",
        &pending,
    );
    metric(
        &mut out,
        "zkpipe_serve_draining",
        "gauge",
        "1 while the daemon drains (takes no new job).",
        &plain(f64::from(u8::from(st.draining))),
    );
    let key_bytes: Samples = [true, false]
        .iter()
        .map(|&pinned| {
            let bytes: usize = st
                .keys
                .iter()
                .filter(|k| k.tier == KeyTier::Hot && k.pinned == pinned)
                .map(|k| k.bytes)
                .sum();
            (format!("{{pinned=\"{pinned}\"}}"), bytes as f64)
        })
        .collect();
    metric(
        &mut out,
        "zkpipe_serve_keys_host_bytes",
        "gauge",
        "Host bytes of the proving keys held, page-locked or not.",
        &key_bytes,
    );
    let keys_by_tier: Samples = [KeyTier::Hot, KeyTier::Warm]
        .iter()
        .map(|&tier| {
            let count = st.keys.iter().filter(|k| k.tier == tier).count();
            (format!("{{tier=\"{}\"}}", tier.name()), count as f64)
        })
        .collect();
    metric(
        &mut out,
        "zkpipe_serve_keys",
        "gauge",
        "Proving keys held in host memory (hot) and kept warm (file mapped in the page cache).",
        &keys_by_tier,
    );
    metric(
        &mut out,
        "zkpipe_serve_keys_warm_file_bytes",
        "gauge",
        "Parameter file bytes of the warm keys, mapped in the page cache.",
        &plain(
            st.keys
                .iter()
                .filter(|k| k.tier == KeyTier::Warm)
                .map(|k| k.bytes as f64)
                .sum(),
        ),
    );
    metric(
        &mut out,
        "zkpipe_serve_synthesis_memory_bytes",
        "gauge",
        "Host bytes the partitions synthesizing now hold, by their estimates.",
        &plain(st.synthesis_memory.in_use as f64),
    );
    if let Some(budget) = st.synthesis_memory.budget {
        metric(
            &mut out,
            "zkpipe_serve_synthesis_memory_budget_bytes",
            "gauge",
            "Host bytes the partitions synthesizing at once may hold.",
            &plain(budget as f64),
        );
    }
    let ended: Samples = st
        .kinds
        .iter()
        .flat_map(|(kind, f)| outcomes(kind, &f.counts))
        .collect();
    metric(
        &mut out,
        "zkpipe_serve_jobs_ended_total",
        "counter",
        "Jobs ended, by kind and outcome.",
        &ended,
    );
    for (name, help, pick) in [
        (
            "zkpipe_serve_job_latency_seconds",
            "Submission to proof, of the jobs completed, by kind.",
            (|f| &f.latency_s) as fn(&crate::daemon::KindFigures) -> &Histogram,
        ),
        (
            "zkpipe_serve_job_queue_wait_seconds",
            "Submission to start, of the jobs started, by kind.",
            |f| &f.queue_wait_s,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (kind, f) in &st.kinds {
            histogram(&mut out, name, kind, pick(f));
        }
    }
    out
}
