//! The `imageResolution` block of the configuration file: where the CUDA
//! version of an image comes from, how long an admission may wait for a
//! registry, which registries speak plain HTTP, and the credentials file.
//!
//! ```yaml
//! imageResolution:
//!   mode: registry            # table (default) | registry | off
//!   timeout: 1s               # the most one admission waits, in total
//!   insecureRegistries: ["registry.local:5000"]
//!   credentialsFile: /etc/gpu-policy/registry/.dockerconfigjson
//! ```

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest `timeout` accepted: the webhook itself is given
/// `install::TIMEOUT_SECONDS` by the API server, and the decision needs
/// time after the registries have had theirs.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(crate::install::TIMEOUT_SECONDS as u64 - 1);

/// Where the CUDA version of an image comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResolutionMode {
    /// The built-in table of image patterns only (no network).
    #[default]
    Table,
    /// The image's own config in its registry, within the time budget, else
    /// the table.
    Registry,
    /// Images imply nothing.
    Off,
}

/// The `imageResolution` block, exactly as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ImageResolutionConfig {
    pub mode: ResolutionMode,
    /// The most one admission waits for registries, in total.
    #[serde(with = "duration_text")]
    pub timeout: Duration,
    /// `host[:port]`s spoken to over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// A dockerconfigjson file (`{"auths": {...}}`): the credentials for
    /// private registries. Absent: anonymous pulls only.
    pub credentials_file: Option<PathBuf>,
}

impl Default for ImageResolutionConfig {
    fn default() -> Self {
        Self {
            mode: ResolutionMode::Table,
            timeout: Duration::from_secs(1),
            insecure_registries: Vec::new(),
            credentials_file: None,
        }
    }
}

impl ImageResolutionConfig {
    /// Refuses what cannot work: a zero timeout or one the webhook's own
    /// timeout would cut short, a registry given as a URL, an empty path.
    /// The message names the field, on one line.
    pub fn validate(&self) -> Result<(), String> {
        if self.timeout.is_zero() {
            return Err("imageResolution.timeout: must be more than 0".to_owned());
        }
        if self.timeout > MAX_TIMEOUT {
            return Err(format!(
                "imageResolution.timeout: {} is longer than {} (the webhook is given {}s in all)",
                DurationText(self.timeout),
                DurationText(MAX_TIMEOUT),
                crate::install::TIMEOUT_SECONDS
            ));
        }
        for host in &self.insecure_registries {
            if let Some(problem) = host_problem(host) {
                return Err(format!(
                    "imageResolution.insecureRegistries: {host:?}: {problem}"
                ));
            }
        }
        if self
            .credentials_file
            .as_ref()
            .is_some_and(|path| path.as_os_str().is_empty())
        {
            return Err("imageResolution.credentialsFile: empty path".to_owned());
        }
        Ok(())
    }
}

/// Why `host` is not a registry's `host[:port]`, if it is not.
fn host_problem(host: &str) -> Option<&'static str> {
    if host.is_empty() {
        return Some("empty");
    }
    if host.contains("://") {
        return Some("a host[:port], not a URL");
    }
    if host.contains('/') {
        return Some("a host[:port], without a path");
    }
    if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("contains white space");
    }
    if let Some((_, port)) = host.rsplit_once(':')
        && !host.ends_with(']')
        && port.parse::<u16>().is_err()
    {
        return Some("the port is not a number from 0 to 65535");
    }
    None
}

/// A duration as the configuration writes it: `1s`, `500ms`, `1.5s`, `2m`,
/// `1m30s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration (e.g. \"1s\", \"500ms\", \"1m30s\")");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (number, tail) = rest.split_at(number_end);
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let value: f64 = number.parse().map_err(|_| bad())?;
        let seconds_per_unit = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        let part = Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| bad())?;
        total = total.checked_add(part).ok_or_else(bad)?;
        rest = tail;
    }
    Ok(total)
}

/// Writes a duration back the way [`parse_duration`] reads it.
pub struct DurationText(pub Duration);

impl fmt::Display for DurationText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = self.0.as_millis();
        if millis.is_multiple_of(1000) {
            write!(f, "{}s", millis / 1000)
        } else {
            write!(f, "{millis}ms")
        }
    }
}

mod duration_text {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&DurationText(*value))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<ImageResolutionConfig, String> {
        serde_saphyr::from_str::<ImageResolutionConfig>(yaml).map_err(|err| err.to_string())
    }

    #[test]
    fn defaults_are_the_table_and_one_second() {
        let config = ImageResolutionConfig::default();
        assert_eq!(config.mode, ResolutionMode::Table);
        assert_eq!(config.timeout, Duration::from_secs(1));
        assert!(config.insecure_registries.is_empty());
        assert_eq!(config.credentials_file, None);
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(parse("{}"), Ok(config));
    }

    #[test]
    fn reads_the_whole_block() {
        let config = parse(
            "mode: registry\ntimeout: 750ms\ninsecureRegistries: [\"registry.local:5000\", \"mirror\"]\n\
             credentialsFile: /etc/gpu-policy/registry/.dockerconfigjson\n",
        );
        let expected = ImageResolutionConfig {
            mode: ResolutionMode::Registry,
            timeout: Duration::from_millis(750),
            insecure_registries: vec!["registry.local:5000".to_owned(), "mirror".to_owned()],
            credentials_file: Some(PathBuf::from("/etc/gpu-policy/registry/.dockerconfigjson")),
        };
        assert_eq!(config, Ok(expected.clone()));
        assert_eq!(expected.validate(), Ok(()));
        assert_eq!(
            parse("mode: off\n").map(|c| c.mode),
            Ok(ResolutionMode::Off)
        );
    }

    #[test]
    fn refuses_unknown_fields_and_modes() {
        assert!(parse("timout: 1s\n").is_err());
        assert!(parse("mode: cluster\n").is_err());
    }

    #[test]
    fn durations_in_the_written_forms() {
        let cases = [
            ("1s", 1000),
            ("500ms", 500),
            ("1.5s", 1500),
            ("2m", 120_000),
            ("1m30s", 90_000),
            ("0.25s", 250),
        ];
        for (text, millis) in cases {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_millis(millis)),
                "{text}"
            );
        }
        for bad in ["", "1", "s", "1x", "-1s", "1.2.3s", "ms500"] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(err.contains("is not a duration"), "{bad}: {err}");
        }
        assert_eq!(
            DurationText(Duration::from_millis(1500)).to_string(),
            "1500ms"
        );
        assert_eq!(DurationText(Duration::from_secs(2)).to_string(), "2s");
    }

    #[test]
    fn a_timeout_must_fit_in_the_webhook_timeout() {
        let with_timeout = |timeout| ImageResolutionConfig {
            timeout,
            ..ImageResolutionConfig::default()
        };
        let zero = with_timeout(Duration::ZERO).validate();
        assert_eq!(
            zero,
            Err("imageResolution.timeout: must be more than 0".to_owned())
        );
        let long = with_timeout(Duration::from_secs(10)).validate();
        assert!(long.is_err_and(|err| err.contains("10s is longer than 4s")));
        assert_eq!(with_timeout(MAX_TIMEOUT).validate(), Ok(()));
        let parsed = parse("timeout: 30s\n").map(|config| config.validate());
        assert!(matches!(parsed, Ok(Err(_))));
    }

    #[test]
    fn insecure_registries_are_hosts_with_an_optional_port() {
        for good in [
            "registry.local:5000",
            "registry.local",
            "127.0.0.1:5000",
            "[::1]:5000",
        ] {
            let config = ImageResolutionConfig {
                insecure_registries: vec![good.to_owned()],
                ..ImageResolutionConfig::default()
            };
            assert_eq!(config.validate(), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("http://registry.local:5000", "not a URL"),
            ("registry.local/v2", "without a path"),
            ("registry.local:http", "port"),
            ("", "empty"),
            ("a b", "white space"),
        ] {
            let config = ImageResolutionConfig {
                insecure_registries: vec![bad.to_owned()],
                ..ImageResolutionConfig::default()
            };
            let err = config.validate().expect_err(bad);
            assert!(
                err.starts_with("imageResolution.insecureRegistries"),
                "{err}"
            );
            assert!(err.contains(why), "{bad}: {err}");
            assert!(!err.contains('\n'));
        }
    }
}
