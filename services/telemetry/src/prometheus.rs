//! The Prometheus text exposition every bin's `/metrics` writes: one writer
//! for the `# HELP` / `# TYPE` / sample lines, so the three services format
//! and escape alike. Owns only the text format; must never hold or read a
//! metric's value (each service keeps its own counters).

use std::fmt::{Display, Write as _};

/// A metric's type line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// An exposition being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// An empty page.
    pub fn new() -> Self {
        Self::default()
    }

    /// One unlabelled metric.
    pub fn single(&mut self, name: &str, help: &str, kind: Kind, value: impl Display) -> &mut Self {
        self.labelled(name, help, kind, [(Vec::<(&str, &str)>::new(), value)])
    }

    /// One metric with a sample per label set (`[("outcome", "bundle")]`);
    /// label values are escaped as the format requires. No sample writes
    /// only the HELP and TYPE lines, so the metric is still listed.
    pub fn labelled<'a, L, V>(
        &mut self,
        name: &str,
        help: &str,
        kind: Kind,
        samples: impl IntoIterator<Item = (L, V)>,
    ) -> &mut Self
    where
        L: IntoIterator<Item = (&'a str, &'a str)>,
        V: Display,
    {
        let _ = writeln!(self.out, "# HELP {name} {}", help.replace('\n', " "));
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
        for (labels, value) in samples {
            let labels: Vec<String> = labels
                .into_iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            if labels.is_empty() {
                let _ = writeln!(self.out, "{name} {value}");
            } else {
                let _ = writeln!(self.out, "{name}{{{}}} {value}", labels.join(","));
            }
        }
        self
    }

    /// Every family, in order, under its Prometheus name; decimal samples
    /// with the family's number of places.
    pub fn families(&mut self, families: &[crate::metrics::Family]) -> &mut Self {
        use crate::metrics::Samples;
        for f in families {
            let name = f.prometheus_name();
            match &f.samples {
                Samples::Integer(samples) => {
                    self.labelled(
                        &name,
                        f.help,
                        f.kind,
                        samples.iter().map(|(l, v)| (pairs(l), *v)),
                    );
                }
                Samples::Decimal { places, samples } => {
                    self.labelled(
                        &name,
                        f.help,
                        f.kind,
                        samples
                            .iter()
                            .map(|(l, v)| (pairs(l), format!("{v:.places$}"))),
                    );
                }
            }
        }
        self
    }

    /// Append text another library rendered (genesis-llm's counters).
    pub fn raw(&mut self, text: &str) -> &mut Self {
        self.out.push_str(text);
        self
    }

    /// The page.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.out)
    }
}

fn pairs(labels: &crate::metrics::Labels) -> impl Iterator<Item = (&str, &str)> {
    labels.iter().map(|(k, v)| (*k, v.as_str()))
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_help_type_and_samples_with_escaped_labels() {
        let mut e = Exposition::new();
        e.single("a_total", "A things.", Kind::Counter, 3)
            .labelled(
                "b_total",
                "B by outcome.",
                Kind::Counter,
                [([("outcome", "ok")], 1), ([("outcome", "say \"hi\"\n")], 2)],
            )
            .labelled(
                "c",
                "Empty.",
                Kind::Gauge,
                Vec::<([(&str, &str); 0], u8)>::new(),
            );
        assert_eq!(
            e.finish(),
            "# HELP a_total A things.\n# TYPE a_total counter\na_total 3\n\
             # HELP b_total B by outcome.\n# TYPE b_total counter\nb_total{outcome=\"ok\"} 1\n\
             b_total{outcome=\"say \\\"hi\\\"\\n\"} 2\n\
             # HELP c Empty.\n# TYPE c gauge\n"
        );
    }

    #[test]
    fn families_write_their_prometheus_names_and_decimal_places() {
        use crate::metrics::Family;
        let mut e = Exposition::new();
        e.families(&[
            Family::labelled(
                "genesis.rpc",
                "RPCs.",
                Kind::Counter,
                [(
                    vec![("method", "/a".to_owned()), ("code", "Ok".to_owned())],
                    2,
                )],
            ),
            Family::decimal("genesis.outbox.lag_seconds", "Lag.", Kind::Gauge, 3, 1.5),
        ]);
        assert_eq!(
            e.finish(),
            "# HELP genesis_rpc_total RPCs.\n# TYPE genesis_rpc_total counter\n\
             genesis_rpc_total{method=\"/a\",code=\"Ok\"} 2\n\
             # HELP genesis_outbox_lag_seconds Lag.\n# TYPE genesis_outbox_lag_seconds gauge\n\
             genesis_outbox_lag_seconds 1.500\n"
        );
    }
}
