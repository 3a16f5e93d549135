//! Human output: aligned tables for lists and `field  value` listings for
//! single objects, both rendered from the JSON form of a response (see
//! [`crate::json`]), so the table and `--output json` can never disagree on
//! what a field holds. Instants are shown in local time.
//!
//! Pure text formatting: this module must never do I/O or decide which
//! command shows which columns (the commands pass their [`Column`]s).

use chrono::{DateTime, Local};
use serde_json::Value;

/// Longest cell in a list table; longer text is cut with `…` so a row stays
/// one line. Single-object listings are never cut.
pub const MAX_CELL: usize = 60;

/// One column of a list table: its header and the dotted path of the JSON
/// field it shows (`primary.model` reaches into a nested message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Header text, printed as given.
    pub header: &'static str,
    /// Dotted path into each row's JSON object.
    pub path: &'static str,
}

/// Shorthand for a [`Column`], so column lists read as tables.
pub const fn col(header: &'static str, path: &'static str) -> Column {
    Column { header, path }
}

/// Lays out rows under headers, columns separated by two spaces and padded
/// to the widest cell; the last column is not padded (no trailing blanks).
pub fn render_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            text.push_str(cell);
            let pad = widths
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(cell.chars().count());
            text.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut headers.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// A list table of `items` (JSON objects) with the given columns.
pub fn list(items: &[Value], columns: &[Column]) -> String {
    let headers: Vec<&str> = columns.iter().map(|c| c.header).collect();
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| {
            columns
                .iter()
                .map(|c| truncate(&cell(lookup(item, c.path)), MAX_CELL))
                .collect()
        })
        .collect();
    render_table(&headers, &rows)
}

/// A single object as `field  value` lines, nested messages flattened with
/// dotted names (`instance.status`) and repeated messages indexed
/// (`actions[0].tool_name`).
pub fn object(value: &Value) -> String {
    let mut rows = Vec::new();
    flatten("", value, &mut rows);
    let rows: Vec<Vec<String>> = rows.into_iter().map(|(k, v)| vec![k, v]).collect();
    let mut out = render_table(&["FIELD", "VALUE"], &rows);
    // The header of a two-column listing is noise; keep only the rows.
    if let Some(pos) = out.find('\n') {
        out.drain(..=pos);
    }
    out
}

fn flatten(prefix: &str, value: &Value, rows: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, field) in map {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&name, field, rows);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            for (i, item) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), item, rows);
            }
        }
        other => rows.push((prefix.to_owned(), cell(Some(other)))),
    }
}

/// Follows a dotted path through nested objects.
pub fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

/// The text of one value in a table: `-` for absent, null and empty text;
/// instants in local time; lists comma-joined; objects as compact JSON;
/// line breaks folded to spaces so a row stays one line; terminal control
/// sequences removed (before the widths are taken, so columns align).
pub fn cell(value: Option<&Value>) -> String {
    let text = match value {
        None | Some(Value::Null) => return "-".into(),
        Some(Value::String(s)) if s.is_empty() => return "-".into(),
        Some(Value::String(s)) => local_instant(s).unwrap_or_else(|| s.clone()),
        Some(Value::Bool(b)) => if *b { "yes" } else { "no" }.into(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Array(items)) if items.is_empty() => return "-".into(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(other @ Value::Object(_)) => other.to_string(),
    };
    crate::terminal::strip_controls(&fold_lines(&text)).into_owned()
}

/// An RFC 3339 instant shown in the local time zone, to the second.
pub fn local_instant(text: &str) -> Option<String> {
    // Only text that looks like an instant: avoids reformatting free text.
    if text.len() < 20 || text.as_bytes().get(4).is_none_or(|b| *b != b'-') {
        return None;
    }
    DateTime::parse_from_rfc3339(text).ok().map(|at| {
        at.with_timezone(&Local)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string()
    })
}

/// Folds line breaks and tabs to single spaces.
pub fn fold_lines(text: &str) -> String {
    if !text.contains(['\n', '\r', '\t']) {
        return text.to_owned();
    }
    text.split(['\n', '\r', '\t'])
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Cuts text to at most `max` characters, marking the cut with `…`.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_columns_without_trailing_blanks() {
        let text = render_table(
            &["ID", "STATUS", "MODE"],
            &[
                vec!["a".into(), "active".into(), "Strategic".into()],
                vec!["bbbb".into(), "paused".into(), "-".into()],
            ],
        );
        assert_eq!(
            text,
            "ID    STATUS  MODE\n\
             a     active  Strategic\n\
             bbbb  paused  -\n"
        );
    }

    #[test]
    fn list_tables_pick_columns_by_path_and_mark_absent_values() {
        let items = vec![
            json!({"id": "p1", "primary": {"model": "m1"}, "tags": ["x", "y"], "ok": true}),
            json!({"id": "p2", "primary": null, "tags": [], "ok": false}),
        ];
        let text = list(
            &items,
            &[
                col("ID", "id"),
                col("MODEL", "primary.model"),
                col("TAGS", "tags"),
                col("OK", "ok"),
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ID  MODEL  TAGS  OK");
        assert_eq!(lines[1], "p1  m1     x,y   yes");
        assert_eq!(lines[2], "p2  -      -     no");
    }

    #[test]
    fn empty_lists_print_only_the_header() {
        assert_eq!(
            list(&[], &[col("ID", "id"), col("NAME", "name")]),
            "ID  NAME\n"
        );
    }

    #[test]
    fn long_cells_are_cut_and_line_breaks_folded() {
        let long = "word ".repeat(40);
        let items = vec![json!({"summary": format!("first\nsecond {long}")})];
        let text = list(&items, &[col("SUMMARY", "summary")]);
        let row = text.lines().nth(1).expect("one row");
        assert!(row.starts_with("first second word"), "{row}");
        assert_eq!(row.chars().count(), MAX_CELL);
        assert!(row.ends_with('…'));
    }

    #[test]
    fn objects_list_flattened_fields() {
        let value = json!({
            "instance": {"id": "i1", "status": "active"},
            "cleared_turns": 3,
            "actions": [{"tool_name": "soa_send_message"}],
        });
        let text = object(&value);
        let pairs: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            pairs,
            [
                vec!["actions[0].tool_name", "soa_send_message"],
                vec!["cleared_turns", "3"],
                vec!["instance.id", "i1"],
                vec!["instance.status", "active"],
            ]
        );
        // Values start in one column.
        let starts: Vec<usize> = text
            .lines()
            .map(|l| l.rfind("  ").map_or(0, |p| p + 2))
            .collect();
        assert!(starts.windows(2).all(|w| w[0] == w[1]), "{text}");
    }

    #[test]
    fn instants_are_shown_in_local_time_and_free_text_is_left_alone() {
        let shown = local_instant("2026-03-01T12:30:05Z").expect("an instant");
        assert_eq!(shown.len(), "2026-03-01 12:30:05".len());
        assert!(shown.ends_with(":05"), "{shown}");
        assert_eq!(local_instant("not a time at all, really"), None);
        assert_eq!(cell(Some(&json!("hello"))), "hello");
    }
}
