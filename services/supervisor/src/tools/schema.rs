//! A small JSON Schema subset checker for tool arguments: `type` (object,
//! string, integer, number, boolean, array), `properties`, `required`,
//! `additionalProperties: false`, `minLength`/`maxLength`, `enum`, `items`,
//! `minItems`/`maxItems`, `minimum`/`maximum`. The first problem is reported
//! with its JSON path so the model can fix the call. Must never accept a
//! value the schema's declared keywords refuse; unknown keywords are ignored.

use serde_json::Value;

/// Why arguments do not fit a schema: the path (`$.options[1]`) and problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct SchemaError {
    pub path: String,
    pub problem: String,
}

fn fail(path: &str, problem: impl Into<String>) -> Result<(), SchemaError> {
    Err(SchemaError {
        path: path.to_owned(),
        problem: problem.into(),
    })
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Check `value` against `schema`.
pub fn validate(schema: &Value, value: &Value) -> Result<(), SchemaError> {
    check(schema, value, "$")
}

fn check(schema: &Value, value: &Value, path: &str) -> Result<(), SchemaError> {
    if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(value);
        let ok = actual == ty || (ty == "number" && actual == "integer");
        if !ok {
            return fail(path, format!("expected {ty}, got {actual}"));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        return fail(
            path,
            format!("must be one of {}", Value::Array(options.clone())),
        );
    }
    match value {
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                return fail(path, format!("must be at least {min} characters"));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                return fail(path, format!("must be at most {max} characters, got {len}"));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && (x.is_nan() || x < min)
            {
                return fail(path, format!("must be at least {min}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && (x.is_nan() || x > max)
            {
                return fail(path, format!("must be at most {max}"));
            }
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && len < min
            {
                return fail(path, format!("must have at least {min} items"));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && len > max
            {
                return fail(path, format!("must have at most {max} items, got {len}"));
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"))?;
                }
            }
        }
        Value::Object(map) => {
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for key in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(key) {
                        return fail(&format!("{path}.{key}"), "required");
                    }
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
            for (key, v) in map {
                match props.and_then(|p| p.get(key)) {
                    Some(prop_schema) => check(prop_schema, v, &format!("{path}.{key}"))?,
                    None if closed => return fail(&format!("{path}.{key}"), "unknown property"),
                    None => {}
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["title"],
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 5},
                "options": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "n": {"type": "integer", "minimum": 0},
                "kind": {"enum": ["a", "b"]}
            }
        })
    }

    #[test]
    fn a_fitting_object_passes() {
        assert_eq!(
            validate(
                &schema(),
                &json!({"title": "ok", "options": ["x"], "n": 2, "kind": "a"})
            ),
            Ok(())
        );
    }

    #[test]
    fn each_keyword_refuses_with_the_path() {
        let cases = [
            (json!([]), "$", "expected object"),
            (json!({}), "$.title", "required"),
            (json!({"title": ""}), "$.title", "at least 1"),
            (json!({"title": "toolong"}), "$.title", "at most 5"),
            (json!({"title": 3}), "$.title", "expected string"),
            (
                json!({"title": "a", "options": ["x", 1]}),
                "$.options[1]",
                "expected string",
            ),
            (
                json!({"title": "a", "options": ["x", "y", "z"]}),
                "$.options",
                "at most 2 items",
            ),
            (json!({"title": "a", "n": -1}), "$.n", "at least 0"),
            (json!({"title": "a", "n": 1.5}), "$.n", "expected integer"),
            (json!({"title": "a", "kind": "c"}), "$.kind", "one of"),
            (
                json!({"title": "a", "extra": 1}),
                "$.extra",
                "unknown property",
            ),
        ];
        for (value, path, problem) in cases {
            let err = validate(&schema(), &value).expect_err("refused");
            assert_eq!(err.path, path, "{value}");
            assert!(err.problem.contains(problem), "{value}: {}", err.problem);
        }
    }
}
