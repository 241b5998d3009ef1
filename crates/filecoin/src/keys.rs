//! Proving keys named by what they prove (a kind and a sector size) rather than by a request:
//! for a daemon that reads a key before its first proof (preload) or lets one go (evict).

use std::str::FromStr;

/// The circuits a key proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyKind {
    PorepC2,
    WindowPost,
    WinningPost,
    Snap,
}

/// A key: the current registered proof of `kind` for sectors of `sector_size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyName {
    pub kind: KeyKind,
    pub sector_size: u64,
}

impl KeyKind {
    /// Its name in requests, configuration and logs.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::PorepC2 => "porep-c2",
            KeyKind::WindowPost => "window-post",
            KeyKind::WinningPost => "winning-post",
            KeyKind::Snap => "snap",
        }
    }
}

/// Why a key's name was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyNameError {
    #[error("{0:?}: not a proof kind (porep-c2, window-post, winning-post or snap)")]
    Kind(String),
    #[error("{0:?}: not KIND:SIZE (as winning-post:32GiB)")]
    Form(String),
    #[error("{0:?}: not a sector size (2KiB, 8MiB, 512MiB, 32GiB or 64GiB, or bytes)")]
    Size(String),
}

impl FromStr for KeyKind {
    type Err = KeyNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            KeyKind::PorepC2,
            KeyKind::WindowPost,
            KeyKind::WinningPost,
            KeyKind::Snap,
        ]
        .into_iter()
        .find(|k| k.name() == s)
        .ok_or_else(|| KeyNameError::Kind(s.to_string()))
    }
}

/// A sector size as Filecoin names them (2KiB … 64GiB) or in bytes.
pub fn parse_sector_size(s: &str) -> Result<u64, KeyNameError> {
    let size = match s.to_ascii_lowercase().as_str() {
        "2kib" => 2 << 10,
        "8mib" => 8 << 20,
        "512mib" => 512 << 20,
        "32gib" => 32 << 30,
        "64gib" => 64 << 30,
        other => other
            .parse()
            .map_err(|_| KeyNameError::Size(s.to_string()))?,
    };
    Ok(size)
}

impl FromStr for KeyName {
    type Err = KeyNameError;

    /// `KIND:SIZE`, as `winning-post:32GiB`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, size) = s
            .split_once(':')
            .ok_or_else(|| KeyNameError::Form(s.to_string()))?;
        Ok(KeyName {
            kind: kind.parse()?,
            sector_size: parse_sector_size(size)?,
        })
    }
}

impl std::fmt::Display for KeyName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.sector_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_bad_ones_say_what_is_wrong() {
        let n: KeyName = "winning-post:32GiB".parse().unwrap();
        assert_eq!(
            n,
            KeyName {
                kind: KeyKind::WinningPost,
                sector_size: 32 << 30
            }
        );
        assert_eq!("snap:2048".parse::<KeyName>().unwrap().sector_size, 2048);
        assert_eq!(n.to_string(), "winning-post:34359738368");
        assert!(matches!(
            "porep:2KiB".parse::<KeyName>(),
            Err(KeyNameError::Kind(_))
        ));
        assert!(matches!(
            "porep-c2".parse::<KeyName>(),
            Err(KeyNameError::Form(_))
        ));
        assert!(matches!(
            "porep-c2:2K".parse::<KeyName>(),
            Err(KeyNameError::Size(_))
        ));
    }
}
