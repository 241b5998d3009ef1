//! [`Config`] from a TOML file: every field of `Config` by its name, any left out at its
//! default, an unknown key an error; byte sizes as numbers or as `"16GiB"`, `"512 MiB"`,
//! `"1.5GB"`.
//!
//! ```toml
//! backend = "gpu"            # auto, cpu or gpu
//! devices = [0, 1]
//! workers_per_device = 2
//! vram_cap = "16GiB"
//! vram_margin = "1GiB"
//! pinned_witness = "36GiB"
//! g2 = "gpu"                 # cpu or gpu
//! streamed_points = "nonzero" # all or nonzero
//! on_device_failure = "cpu"  # fail or cpu
//! ```

use std::path::Path;

use serde::{Deserialize, Deserializer};

use crate::{Config, ProveError};

/// A byte size: a count of bytes, or a number with a unit (B, kB, MB, GB, TB: powers of 1000;
/// KiB, MiB, GiB, TiB: powers of 1024), with or without a space between.
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    let value: f64 = number.parse().map_err(|_| {
        format!("{text:?} is not a byte size (say 1073741824, \"16GiB\" or \"512 MB\")")
    })?;
    let scale: f64 = match unit {
        "" | "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes >= usize::MAX as f64 || bytes.fract() != 0.0 {
        return Err(format!(
            "{text:?} is not a whole number of bytes this machine can count"
        ));
    }
    Ok(bytes as usize)
}

/// A byte size in a file: a number, or a string with a unit.
#[derive(Deserialize)]
#[serde(untagged)]
enum Bytes {
    Count(u64),
    Text(String),
}

impl Bytes {
    fn bytes<E: serde::de::Error>(self) -> Result<usize, E> {
        match self {
            Bytes::Count(n) => usize::try_from(n).map_err(E::custom),
            Bytes::Text(t) => parse_bytes(&t).map_err(E::custom),
        }
    }
}

pub(crate) fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    Bytes::deserialize(d)?.bytes()
}

pub(crate) fn de_opt_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    Option::<Bytes>::deserialize(d)?
        .map(Bytes::bytes)
        .transpose()
}

impl Config {
    /// A configuration from TOML text (then checked, [`Config::check`]).
    pub fn from_toml(text: &str) -> Result<Config, ProveError> {
        let cfg: Config = toml::from_str(text).map_err(|source| ProveError::ConfigFile {
            path: String::new(),
            source: Box::new(source),
        })?;
        cfg.check()?;
        Ok(cfg)
    }

    /// A configuration from a TOML file ([`Config::from_toml`]); errors name the file.
    pub fn from_file(path: &Path) -> Result<Config, ProveError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProveError::ConfigRead {
            path: shown.clone(),
            source,
        })?;
        Config::from_toml(&text).map_err(|e| match e {
            ProveError::ConfigFile { source, .. } => ProveError::ConfigFile {
                path: shown,
                source,
            },
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, G2Placement, OnDeviceFailure, StreamedPoints};

    #[test]
    fn byte_sizes_read_as_people_write_them() {
        assert_eq!(parse_bytes("1073741824"), Ok(1 << 30));
        assert_eq!(parse_bytes("16GiB"), Ok(16 << 30));
        assert_eq!(parse_bytes("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_bytes(" 2 kB "), Ok(2000));
        for bad in [
            "",
            "GiB",
            "16 gigs",
            "1.5 B",
            "-1",
            "1e999 TiB",
            "99999999999 TiB",
        ] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_file_sets_the_fields_it_names_and_leaves_the_rest_at_their_defaults() {
        let cfg = Config::from_toml(
            r#"
            backend = "gpu"
            devices = [0, 1]
            workers_per_device = 3
            vram_cap = "16GiB"
            vram_margin = 536870912
            pinned_witness = "36 GiB"
            g2 = "gpu"
            streamed_points = "nonzero"
            on_device_failure = "cpu"
            "#,
        )
        .unwrap();
        assert_eq!(cfg.backend, Backend::Gpu);
        assert_eq!(cfg.devices, Some(vec![0, 1]));
        assert_eq!(cfg.workers_per_device, 3);
        assert_eq!(cfg.vram_cap, Some(16 << 30));
        assert_eq!(cfg.vram_margin, 512 << 20);
        assert_eq!(cfg.pinned_witness, 36 << 30);
        assert_eq!(cfg.g2, G2Placement::Gpu);
        assert_eq!(cfg.streamed_points, StreamedPoints::Nonzero);
        assert_eq!(Config::default().streamed_points, StreamedPoints::All);
        assert_eq!(cfg.on_device_failure, OnDeviceFailure::Cpu);
        let d = Config::default();
        assert_eq!(
            (cfg.queue_capacity, cfg.pin_key, cfg.pinned_per_device),
            (d.queue_capacity, d.pin_key, d.pinned_per_device)
        );
        assert_eq!(Config::from_toml("").unwrap().backend, Backend::Auto);
    }

    #[test]
    fn unknown_keys_bad_values_and_huge_counts_are_errors_that_say_which() {
        for (text, says) in [
            ("workers = 2", "unknown field `workers`"),
            ("backend = \"tpu\"", "unknown variant `tpu`"),
            ("vram_cap = \"16 gigs\"", "unknown unit"),
            ("queue_capacity = \"four\"", "invalid type"),
            ("queue_capacity = 100000000", "queue_capacity"),
        ] {
            let e = Config::from_toml(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        let e = Config::from_file(Path::new("/no/such/engine.toml")).unwrap_err();
        assert!(e.to_string().contains("/no/such/engine.toml"), "{e}");
    }
}
