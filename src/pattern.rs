//! Content filters of topic subscriptions: EventBridge-style patterns, validated at the edge
//! (each error naming the field path), and every subscription of a topic compiled into one
//! automaton (quamina) so a publish's matching cost grows with the message, not with the
//! number of subscriptions.
//!
//! The language: a filter is a JSON object mirroring the message's structure; each leaf is a
//! non-empty array of accepted values, any one of which matches (OR), and every leaf must
//! match (AND). A value is a string, number, boolean or null (exact match), or one matcher:
//! `prefix`, `suffix`, `equals-ignore-case`, `anything-but`, `numeric` or `exists`. A message
//! array matches when one of its elements does.
//!
//! What a filter means, as quamina 0.7.0 matches it (the tests pin each point):
//! - Numbers compare by value, as doubles: `1` matches `1`, `1.0` and `1e0`, `150` is in
//!   `[">", 100, "<=", 200]`; integers past 2^53 can equal their neighbours; a message's -0
//!   counts as just below 0 (a filter's -0 is 0).
//! - Strings and numbers never match each other: `"100"` is neither `100` nor `>= 100`, and
//!   `prefix`, `suffix`, `equals-ignore-case` and `anything-but` of strings look at strings
//!   only. `anything-but` matches a value of another type, never a missing field.
//! - `exists` looks at leaves: a field holding an object or an empty array does not exist,
//!   one holding `null` does; a missing parent makes every field below it missing.
//! - Within an array of objects, the fields of one filter object match within one element.
//! - Quamina reads a message only as far as the filters need: one broken after the fields
//!   they name can still match; one it cannot read matches no filter.
//!
//! Quamina 0.7.0 also gets things wrong, worked around here:
//! - An exact value inserted into a field's automaton after a matcher was merged in matches
//!   values it should not: exact values go first (`build`), and an array mixing both is
//!   given as two patterns (`Pattern::alternatives`).
//! - A bare upper bound (`["<", 10]`) matches every string, boolean and null, and a range's
//!   exclusive lower bound often takes the bound itself in: `for_quamina` rewrites both.
//! - An `exists: false` after another `exists`, or in a message without any filtered field,
//!   is not looked at: every message gets a last field (`LAST`).
//! - An automaton state leading to 256 or more next fields panics: [`PatternSet`] shards.
//! - A field name holding "." never matches: filters refuse one.

use std::collections::HashMap;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use quamina::Quamina;
use serde_json::{Map, Value, json};

/// Leaves (arrays of accepted values) in one filter.
const MAX_FIELDS: usize = 64;
/// Levels of nested objects, the top one included.
const MAX_DEPTH: usize = 16;
/// Values in one array.
const MAX_VALUES: usize = 256;
/// Matcher objects in one array: each may add a next field to one automaton state.
const MAX_MATCHERS: usize = 32;
/// Arrays mixing exact values with matcher objects in one filter: each doubles the patterns
/// quamina is given for it (see [`Pattern::alternatives`]).
const MAX_MIXED: usize = 2;
/// Paths through one filter's arrays, an array of numbers or matchers counting one per value:
/// quamina builds them all (and refuses past 1024 only then), a set rebuilds them all.
const MAX_COMBINATIONS: usize = 256;
/// The filter as compact JSON text.
const MAX_TEXT: usize = 8 * 1024;
/// Next fields one automaton state may lead to, as [`Load`] counts them: quamina 0.7.0 keeps
/// that number in a `u8` and panics past 255. One filter within the limits above counts at
/// most 4 × 32 (and [`compile`] halves a shard that still fails).
const SHARD_LOAD: usize = 200;

const MATCHERS: &str = "prefix, suffix, equals-ignore-case, anything-but, numeric, exists";
const NUMERIC: &str = "\"numeric\" takes pairs of an operator (<, <=, =, >=, >) and a number";

/// A filter refused, naming where (`filter.detail.codes[2]`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct PatternError {
    pub path: String,
    pub problem: String,
}

fn refuse<T>(path: &str, problem: impl Into<String>) -> Result<T, PatternError> {
    Err(PatternError {
        path: path.to_owned(),
        problem: problem.into(),
    })
}

/// A validated filter: its canonical JSON (what the store keeps), and its arrays as quamina
/// builds them.
#[derive(Clone)]
pub struct Pattern {
    text: String,
    value: Value,
    /// In quamina's order: by path.
    leaves: Vec<Leaf>,
    /// Compiled on the first [`Pattern::matches`] only: a subscription's filter is usually
    /// matched through its topic's set, and an automaton costs kilobytes.
    alone: OnceLock<Arc<PatternSet<()>>>,
}

/// One array of accepted values, split by how quamina builds them.
#[derive(Clone)]
struct Leaf {
    /// Quamina's path: the names joined by a line break (which names cannot contain).
    path: String,
    /// Strings, numbers, booleans and null: quamina inserts them into a trie.
    exact: Vec<Value>,
    /// Matcher objects: quamina merges an automaton of each into the field's.
    matchers: Vec<Value>,
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Pattern").field(&self.text).finish()
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Pattern {}

impl Pattern {
    /// Validate a filter given as JSON (`{"filter": <this>}` in the API). A value repeated
    /// in an array is kept once.
    pub fn parse(value: &Value) -> Result<Pattern, PatternError> {
        let Value::Object(fields) = value else {
            return refuse("filter", "a filter must be an object of fields");
        };
        if fields.is_empty() {
            return refuse(
                "filter",
                "a filter needs at least one field (leave the filter out to receive every message)",
            );
        }
        let mut walk = Walk::default();
        let value = Value::Object(walk.object(fields, "filter", "", 1)?);
        let text = value.to_string();
        if text.len() > MAX_TEXT {
            let problem = format!(
                "a filter is at most {MAX_TEXT} bytes of JSON, not {}",
                text.len()
            );
            return refuse("filter", problem);
        }
        let mut leaves = walk.leaves;
        leaves.sort_by(|a, b| a.path.cmp(&b.path));
        let pattern = Pattern {
            text,
            value,
            leaves,
            alone: OnceLock::new(),
        };
        let alternatives = pattern.alternatives();
        let combinations = alternatives
            .iter()
            .map(|parts| {
                parts
                    .iter()
                    .map(Part::fan_out)
                    .fold(1, usize::saturating_mul)
            })
            .max()
            .unwrap_or(1);
        if combinations > MAX_COMBINATIONS {
            let problem = format!(
                "the numbers and matcher objects of a filter's arrays combine in at most \
                 {MAX_COMBINATIONS} ways, not {combinations}"
            );
            return refuse("filter", problem);
        }
        // Whatever else quamina refuses, so that a set never meets it.
        build(alternatives.iter().map(|parts| (0, parts)).collect()).map_err(|problem| {
            PatternError {
                path: "filter".into(),
                problem,
            }
        })?;
        Ok(pattern)
    }

    /// Read back a pattern stored by us (its JSON text); same validation.
    pub fn from_stored(text: &str) -> Result<Pattern, PatternError> {
        let value: Value = serde_json::from_str(text).map_err(|e| PatternError {
            path: "filter".into(),
            problem: format!("not JSON: {e}"),
        })?;
        Self::parse(&value)
    }

    /// The compact JSON text, what the store keeps.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn to_value(&self) -> Value {
        self.value.clone()
    }

    /// Whether this one pattern matches `payload` (JSON text of an object). Used by replay
    /// into one subscriber.
    pub fn matches(&self, payload: &str) -> bool {
        let alone = self
            .alone
            .get_or_init(|| Arc::new(PatternSet::new([((), Some(self.clone()))])));
        !alone.matches(payload).is_empty()
    }

    /// The patterns quamina is given for this one, each a list of [`Part`]s by path. An
    /// array mixing exact values with matchers is given once with each kind (so the exact
    /// values can go first, see [`build`]): quamina reports the same id for either.
    fn alternatives(&self) -> Vec<Vec<Part>> {
        let mut alternatives = vec![Vec::new()];
        for leaf in &self.leaves {
            let parts: Vec<Part> = [(Kind::Exact, &leaf.exact), (Kind::Matcher, &leaf.matchers)]
                .into_iter()
                .filter(|(_, values)| !values.is_empty())
                .map(|(kind, values)| Part::new(&leaf.path, kind, values))
                .collect();
            alternatives = alternatives
                .into_iter()
                .flat_map(|alternative: Vec<Part>| {
                    parts.iter().map(move |part| {
                        let mut alternative = alternative.clone();
                        alternative.push(part.clone());
                        alternative
                    })
                })
                .collect();
        }
        alternatives
    }
}

/// How quamina builds an array's values; the order is the order they must be added in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    /// `{"exists": …}`: no automaton, only a next field per path.
    Exists,
    /// Inserted into the field's automaton as a trie.
    Exact,
    /// Merged into the field's automaton; any of them may share a state with any value.
    Matcher,
}

/// One array (or the exact or matcher part of one) as quamina is given it. Ordered as the
/// patterns of an automaton must be added: by path, then by kind (see [`build`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Part {
    path: String,
    kind: Kind,
    /// Each value's JSON text.
    values: Vec<String>,
    /// What [`Load`] counts exact values by: their text, a number's value.
    keys: Vec<String>,
}

impl Part {
    fn new(path: &str, kind: Kind, values: &[Value]) -> Part {
        let kind = match values {
            [Value::Object(m)] if m.contains_key("exists") => Kind::Exists,
            _ => kind,
        };
        let values: Vec<Value> = values.iter().map(for_quamina).collect();
        let key = |v: &Value| match v.as_f64() {
            Some(n) => n.to_string(),
            None => v.to_string(),
        };
        Part {
            path: path.to_owned(),
            kind,
            values: values.iter().map(Value::to_string).collect(),
            keys: values.iter().map(key).collect(),
        }
    }

    /// The next fields quamina goes on to from each state before: one for exact strings,
    /// booleans and null (in one trie), one per value otherwise.
    fn fan_out(&self) -> usize {
        match self.kind {
            Kind::Exact if !self.values.iter().any(|v| is_number(v)) => 1,
            Kind::Exists => 1,
            _ => self.values.len(),
        }
    }
}

/// Whether a value's JSON text is a number's.
fn is_number(text: &str) -> bool {
    text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
}

/// A value as quamina is given it. Quamina 0.7.0 matches a bare upper bound (`["<", 10]`) on
/// every string, boolean and null too, but not a range: an upper bound gets the lowest number
/// as lower bound. And a range's exclusive lower bound often takes the bound itself in
/// (`[">", 2, "<", 9]` matches 2): it becomes an inclusive bound at the next number up.
///
/// And -0 becomes 0: quamina orders -0 below 0 (a message's -0 is neither `0` nor `>= 0`).
fn for_quamina(value: &Value) -> Value {
    let value = positive_zero(value);
    match value
        .get("numeric")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([op @ Value::String(s), n]) if s.starts_with('<') => {
            json!({"numeric": [">=", f64::MIN, op, n]})
        }
        Some([Value::String(s), lower, upper_op, upper]) if s == ">" => {
            let lower = lower.as_f64().map(f64::next_up);
            json!({"numeric": [">=", lower, upper_op, upper]})
        }
        _ => value,
    }
}

fn positive_zero(value: &Value) -> Value {
    match value {
        Value::Number(n) if n.as_f64() == Some(0.0) => json!(0),
        Value::Array(items) => Value::Array(items.iter().map(positive_zero).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), positive_zero(v)))
                .collect(),
        ),
        _ => value.clone(),
    }
}

/// A field added to every payload, named to sort after any other (names cannot start so).
/// Quamina 0.7.0 looks for the next `exists: false` field after an `exists: true` one, or
/// after a first `exists: false` one when the payload has none of the filters' fields, only
/// while reading a later field of the payload: this one is always there.
const LAST: &str = "\u{10FFFF}";

/// The pattern that puts [`LAST`] among the fields quamina reads, and matches nothing.
const READ_LAST: &str = "{\"\u{10FFFF}\":[\"never\"]}";

/// `payload` with the [`LAST`] field, if it is an object.
fn with_last(payload: &str) -> Option<String> {
    let rest = payload.trim_start().strip_prefix('{')?;
    let comma = if rest.trim_start().starts_with('}') {
        ""
    } else {
        ","
    };
    Some(format!("{{\"{LAST}\":0{comma}{rest}"))
}

/// A pattern for quamina: a flat object of paths, joined as quamina joins nested names.
fn quamina_text(parts: &[Part]) -> String {
    let fields: Vec<String> = parts
        .iter()
        .map(|part| {
            format!(
                "{}:[{}]",
                Value::from(part.path.as_str()),
                part.values.join(",")
            )
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// One automaton of `alternatives` (quamina id, parts), built now (quamina does so on the
/// first match, and would panic there on every match), or why quamina could not.
///
/// Sorted so that on every field automaton several patterns share (the first field's, and
/// those after a value or `exists` they all name), exact values are inserted before any
/// matcher is merged in: quamina 0.7.0 inserts into the merged states in place, and so
/// attaches the exact value's next field to states other values reach too.
fn build(mut alternatives: Vec<(usize, &Vec<Part>)>) -> Result<Quamina<usize>, String> {
    alternatives.sort_by(|a, b| a.1.cmp(b.1));
    let mut quamina = Quamina::new();
    quamina
        .add_pattern(usize::MAX, READ_LAST)
        .map_err(|e| e.to_string())?;
    for (id, parts) in alternatives {
        quamina
            .add_pattern(id, &quamina_text(parts))
            .map_err(|e| e.to_string())?;
    }
    if catch_unwind(AssertUnwindSafe(|| quamina.matches_for_event(b"{}"))).is_err() {
        return Err("too complex to compile".into());
    }
    Ok(quamina)
}

/// The validation walk over a filter, collecting its leaves.
#[derive(Default)]
struct Walk {
    leaves: Vec<Leaf>,
    mixed: usize,
}

impl Walk {
    /// The object of fields at `path` (`at`: its quamina path), `depth` levels down;
    /// returns it canonical.
    fn object(
        &mut self,
        fields: &Map<String, Value>,
        path: &str,
        at: &str,
        depth: usize,
    ) -> Result<Map<String, Value>, PatternError> {
        let mut canonical = Map::new();
        for (name, value) in fields {
            let path = format!("{path}.{name}");
            if name.contains(['.', '\n']) || name.starts_with(LAST) {
                return refuse(
                    &path,
                    "a field name cannot contain \".\" or a line break, nor start with U+10FFFF",
                );
            }
            let at = if at.is_empty() {
                name.clone()
            } else {
                format!("{at}\n{name}")
            };
            let value = match value {
                Value::Object(inner) if inner.is_empty() => {
                    return refuse(&path, "an object of fields needs at least one field");
                }
                Value::Object(_) if depth == MAX_DEPTH => {
                    return refuse(&path, format!("a filter nests at most {MAX_DEPTH} objects"));
                }
                Value::Object(inner) => Value::Object(self.object(inner, &path, &at, depth + 1)?),
                Value::Array(values) => Value::Array(self.leaf(values, &path, at)?),
                _ => {
                    return refuse(
                        &path,
                        "a field's value must be an array of accepted values or an object of fields",
                    );
                }
            };
            canonical.insert(name.clone(), value);
        }
        Ok(canonical)
    }

    /// The array of accepted values at `path`; returns it without repeats.
    fn leaf(
        &mut self,
        values: &[Value],
        path: &str,
        at: String,
    ) -> Result<Vec<Value>, PatternError> {
        if self.leaves.len() == MAX_FIELDS {
            return refuse(
                "filter",
                format!("a filter matches at most {MAX_FIELDS} fields"),
            );
        }
        if values.is_empty() {
            return refuse(path, "an array of accepted values cannot be empty");
        }
        if values.len() > MAX_VALUES {
            return refuse(
                path,
                format!("an array holds at most {MAX_VALUES} accepted values"),
            );
        }
        let mut kept: Vec<Value> = Vec::new();
        let mut leaf = Leaf {
            path: at,
            exact: Vec::new(),
            matchers: Vec::new(),
        };
        for (i, value) in values.iter().enumerate() {
            let is_matcher = accepted(value, &format!("{path}[{i}]"))?;
            if !kept.contains(value) {
                kept.push(value.clone());
                if is_matcher {
                    &mut leaf.matchers
                } else {
                    &mut leaf.exact
                }
                .push(value.clone());
            }
        }
        let exists = leaf.matchers.iter().any(|m| m.get("exists").is_some());
        if exists && kept.len() > 1 {
            // Quamina would heed whichever value comes first only.
            return refuse(path, "\"exists\" must be the only value of its array");
        }
        if leaf.matchers.len() > MAX_MATCHERS {
            let problem = format!("an array holds at most {MAX_MATCHERS} matcher objects");
            return refuse(path, problem);
        }
        if !leaf.exact.is_empty() && !leaf.matchers.is_empty() {
            self.mixed += 1;
            if self.mixed > MAX_MIXED {
                let problem = format!(
                    "at most {MAX_MIXED} arrays of a filter can mix exact values with matcher objects"
                );
                return refuse(path, problem);
            }
        }
        self.leaves.push(leaf);
        Ok(kept)
    }
}

/// Check one element of an array of accepted values, at `path`: whether it is a matcher.
fn accepted(value: &Value, path: &str) -> Result<bool, PatternError> {
    match value {
        Value::String(_) | Value::Bool(_) | Value::Null => Ok(false),
        Value::Number(n) if n.as_f64().is_some_and(f64::is_finite) => Ok(false),
        Value::Number(_) => refuse(path, "a number must be finite"),
        Value::Object(matcher) => match matcher.iter().next() {
            Some((name, argument)) if matcher.len() == 1 => check_matcher(name, argument)
                .map(|()| true)
                .map_err(|problem| PatternError {
                    path: path.into(),
                    problem,
                }),
            _ => refuse(
                path,
                format!("a matcher object has exactly one key, one of: {MATCHERS}"),
            ),
        },
        Value::Array(_) => refuse(
            path,
            "an accepted value is a string, number, boolean, null or matcher object, not an array",
        ),
    }
}

fn check_matcher(name: &str, argument: &Value) -> Result<(), String> {
    match (name, argument) {
        ("prefix" | "suffix" | "equals-ignore-case", Value::String(_)) => Ok(()),
        ("prefix" | "suffix" | "equals-ignore-case", _) => {
            Err(format!("\"{name}\" takes a string"))
        }
        ("exists", Value::Bool(_)) => Ok(()),
        ("exists", _) => Err("\"exists\" takes true or false".into()),
        ("anything-but", excluded) if anything_but(excluded) => Ok(()),
        ("anything-but", _) => Err("\"anything-but\" takes a string, a number, or a non-empty \
                                    array of strings or of numbers"
            .into()),
        ("numeric", Value::Array(items)) => numeric(items),
        ("numeric", _) => Err(NUMERIC.into()),
        (other, _) => Err(format!(
            "unknown matcher \"{other}\" (the matchers are {MATCHERS})"
        )),
    }
}

fn anything_but(excluded: &Value) -> bool {
    let finite = |v: &Value| v.as_f64().is_some_and(f64::is_finite);
    match excluded {
        Value::String(_) => true,
        Value::Number(_) => finite(excluded),
        Value::Array(all) if all.is_empty() || all.len() > MAX_VALUES => false,
        Value::Array(all) => all.iter().all(Value::is_string) || all.iter().all(finite),
        _ => false,
    }
}

/// `[op, n]`, or `[lower-op, n, upper-op, m]` with n < m.
fn numeric(items: &[Value]) -> Result<(), String> {
    if items.len() != 2 && items.len() != 4 {
        return Err(NUMERIC.into());
    }
    let mut comparisons = Vec::with_capacity(2);
    for pair in items.chunks_exact(2) {
        let [op, n] = pair else {
            return Err(NUMERIC.into());
        };
        match (op.as_str(), n.as_f64()) {
            (Some(op @ ("<" | "<=" | "=" | ">=" | ">")), Some(n)) if n.is_finite() => {
                comparisons.push((op, n));
            }
            _ => return Err(NUMERIC.into()),
        }
    }
    if let [(lower_op, lower), (upper_op, upper)] = comparisons[..] {
        if !matches!(lower_op, ">" | ">=") || !matches!(upper_op, "<" | "<=") {
            return Err(
                "\"numeric\" with two comparisons takes a lower bound (> or >=), \
                        then an upper bound (< or <=)"
                    .into(),
            );
        }
        if lower >= upper {
            return Err("\"numeric\" needs its lower bound below its upper bound".into());
        }
    }
    Ok(())
}

/// Every subscription of one topic, compiled once: the keys whose pattern matches a payload,
/// and the keys without a pattern (which match everything).
///
/// Identical patterns are compiled once for all their keys. Quamina 0.7.0 panics on an
/// automaton state leading to 256 or more next fields, which a few hundred patterns reach
/// when they share a number, or a string after the first field, or overlap in matchers
/// (`{"amount": [{"numeric": [">", …]}]}`): such patterns are split into shards, each under
/// `SHARD_LOAD` next fields per state as `Load` counts them, and a payload is matched
/// against every shard. Patterns that differ in their values share one shard however many.
pub struct PatternSet<K> {
    /// Each distinct key once, in the order given.
    keys: Vec<K>,
    /// Indexes into `keys` of those without a pattern, ascending.
    unfiltered: Vec<usize>,
    /// For each distinct pattern (its quamina id), the indexes of its keys.
    groups: Vec<Vec<usize>>,
    shards: Vec<Quamina<usize>>,
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> PatternSet<K> {
    /// Infallible: the patterns were validated, each compiled alone. A key given twice
    /// matches when any of its patterns does (always, if one entry has none).
    pub fn new(entries: impl IntoIterator<Item = (K, Option<Pattern>)>) -> PatternSet<K> {
        let mut index: HashMap<K, usize> = HashMap::new();
        let mut keys = Vec::new();
        let mut unfiltered = Vec::new();
        let mut by_text: HashMap<String, usize> = HashMap::new();
        let mut patterns: Vec<Pattern> = Vec::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (key, pattern) in entries {
            let k = *index.entry(key.clone()).or_insert_with(|| {
                keys.push(key);
                keys.len() - 1
            });
            let Some(pattern) = pattern else {
                unfiltered.push(k);
                continue;
            };
            let g = *by_text.entry(pattern.text.clone()).or_insert_with(|| {
                patterns.push(pattern);
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(k);
        }
        unfiltered.sort_unstable();
        unfiltered.dedup();
        for group in &mut groups {
            group.dedup();
        }

        let mut shards = Vec::new();
        let mut shard: Vec<(usize, Vec<Part>)> = Vec::new();
        let mut load = Load::default();
        for (g, pattern) in patterns.iter().enumerate() {
            let alternatives = pattern.alternatives();
            let own = Load::of(&alternatives);
            if !shard.is_empty() && !load.fits(&own) {
                shards.extend(compile(&shard));
                shard.clear();
                load = Load::default();
            }
            load.add(own);
            shard.extend(alternatives.into_iter().map(|parts| (g, parts)));
        }
        if !shard.is_empty() {
            shards.extend(compile(&shard));
        }
        PatternSet {
            keys,
            unfiltered,
            groups,
            shards,
        }
    }

    /// The keys whose pattern matches `payload`, each once, in the order they were given to
    /// `new`. A payload quamina cannot read matches only the unfiltered keys.
    pub fn matches(&self, payload: &str) -> Vec<K> {
        let mut hits = self.unfiltered.clone();
        // Only filters read the payload: without any, it is not copied.
        let payload = match self.shards.is_empty() {
            true => None,
            false => with_last(payload),
        };
        let Some(payload) = payload else {
            return hits.into_iter().map(|k| self.keys[k].clone()).collect();
        };
        for shard in &self.shards {
            let Ok(matched) = shard.matches_for_event(payload.as_bytes()) else {
                hits = self.unfiltered.clone();
                break;
            };
            let keys = matched
                .into_iter()
                .filter_map(|g| self.groups.get(g))
                .flatten();
            hits.extend(keys.copied());
        }
        hits.sort_unstable();
        hits.dedup();
        hits.into_iter().map(|k| self.keys[k].clone()).collect()
    }

    /// Distinct keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// `alternatives` in as few automata as quamina builds: one, or (should adding or freezing
/// fail: a field's automaton past quamina's byte budget, or a state [`Load`] let past 255)
/// halves of them, recursively.
fn compile(alternatives: &[(usize, Vec<Part>)]) -> Vec<Quamina<usize>> {
    if let Ok(quamina) = build(alternatives.iter().map(|(g, parts)| (*g, parts)).collect()) {
        return vec![quamina];
    }
    if alternatives.len() < 2 {
        // Cannot happen: `Pattern::parse` built each pattern alone.
        return Vec::new();
    }
    let (first, second) = alternatives.split_at(alternatives.len() / 2);
    let mut shards = compile(first);
    shards.extend(compile(second));
    shards
}

/// An upper bound of the next fields one state of a field's automaton may lead to: each
/// exact value adds one to the state it ends in, each matcher may add one to any.
///
/// Patterns share a field's automaton when they reach it through the same fields before it
/// (in quamina's order), each a single string, boolean or null, or an `exists`, since quamina
/// reuses where those lead; after any other array, each pattern goes on from its own next
/// field. And while an automaton knows one single string only, its patterns share where it
/// leads: one next field.
#[derive(Default)]
struct Load {
    /// By a hash of the shared fields before and the path (a collision only counts more).
    automata: HashMap<u64, Automaton>,
}

#[derive(Default)]
struct Automaton {
    matchers: usize,
    exact: HashMap<String, usize>,
    /// The largest count in `exact`.
    most: usize,
    /// Whether it got more than single values (quamina does not share where those lead).
    varied: bool,
}

impl Automaton {
    /// The one value it knows, if it knows one single value only (or none).
    fn single(&self) -> Option<Option<&String>> {
        (!self.varied && self.exact.len() <= 1).then(|| self.exact.keys().next())
    }
}

impl Load {
    fn of(alternatives: &[Vec<Part>]) -> Load {
        let mut load = Load::default();
        for parts in alternatives {
            let mut before = DefaultHasher::new();
            for part in parts {
                if part.kind != Kind::Exists {
                    let mut at = before.clone();
                    part.path.hash(&mut at);
                    let automaton = load.automata.entry(at.finish()).or_default();
                    if part.kind == Kind::Matcher {
                        automaton.matchers += part.values.len();
                    }
                    for key in part.keys.iter().filter(|_| part.kind == Kind::Exact) {
                        let n = automaton.exact.entry(key.clone()).or_default();
                        *n += 1;
                        automaton.most = automaton.most.max(*n);
                    }
                    let single = part.kind == Kind::Exact
                        && matches!(&part.values[..], [v] if !is_number(v));
                    if !single {
                        automaton.varied = true;
                        break;
                    }
                }
                part.hash(&mut before);
            }
        }
        load
    }

    /// Whether `other` on top of this stays within [`SHARD_LOAD`].
    fn fits(&self, other: &Load) -> bool {
        other.automata.iter().all(|(at, add)| {
            let Some(have) = self.automata.get(at) else {
                return add.single().is_some() || add.matchers + add.most <= SHARD_LOAD;
            };
            if let (Some(a), Some(b)) = (have.single(), add.single())
                && (a.is_none() || b.is_none() || a == b)
            {
                return true;
            }
            let most = add
                .exact
                .iter()
                .map(|(key, n)| n + have.exact.get(key).copied().unwrap_or(0))
                .fold(have.most.max(add.most), usize::max);
            have.matchers + add.matchers + most <= SHARD_LOAD
        })
    }

    fn add(&mut self, other: Load) {
        for (at, add) in other.automata {
            let have = self.automata.entry(at).or_default();
            have.matchers += add.matchers;
            have.varied |= add.varied;
            for (key, n) in add.exact {
                let count = have.exact.entry(key).or_default();
                *count += n;
                have.most = have.most.max(*count);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(filter: Value) -> Pattern {
        Pattern::parse(&filter).unwrap()
    }

    /// Which of `payloads` the filter matches, alone and in a set.
    fn hits(filter: Value, payloads: &[&str]) -> Vec<bool> {
        let pattern = pattern(filter);
        let set = PatternSet::new([(0, Some(pattern.clone()))]);
        payloads
            .iter()
            .map(|payload| {
                let alone = pattern.matches(payload);
                assert_eq!(alone, set.matches(payload) == [0], "{payload}");
                alone
            })
            .collect()
    }

    fn error(filter: Value) -> String {
        Pattern::parse(&filter).unwrap_err().to_string()
    }

    #[test]
    fn exact_values_match_their_own_type_only() {
        let payloads = [
            r#"{"a":"x"}"#,
            r#"{"a":"y"}"#,
            r#"{"a":"X"}"#,
            r#"{"b":"x"}"#,
        ];
        assert_eq!(
            hits(json!({"a": ["x"]}), &payloads),
            [true, false, false, false]
        );
        let payloads = [
            r#"{"a":1}"#,
            r#"{"a":1.0}"#,
            r#"{"a":1e0}"#,
            r#"{"a":"1"}"#,
            r#"{"a":2}"#,
        ];
        assert_eq!(
            hits(json!({"a": [1]}), &payloads),
            [true, true, true, false, false]
        );
        assert_eq!(
            hits(json!({"a": ["1"]}), &payloads),
            [false, false, false, true, false]
        );
        let payloads = [r#"{"a":true}"#, r#"{"a":"true"}"#, r#"{"a":false}"#];
        assert_eq!(hits(json!({"a": [true]}), &payloads), [true, false, false]);
        let payloads = [r#"{"a":null}"#, r#"{"a":"null"}"#, r#"{"b":1}"#];
        assert_eq!(hits(json!({"a": [null]}), &payloads), [true, false, false]);
        let payloads = [
            r#"{"a":"a\"b\\c\n"}"#,
            r#"{"a":"\u00e9t\u00e9"}"#,
            r#"{"a":"été"}"#,
        ];
        assert_eq!(
            hits(json!({"a": ["a\"b\\c\n", "été"]}), &payloads),
            [true, true, true]
        );
    }

    #[test]
    fn nested_fields_and_payload_arrays() {
        let filter = json!({"detail": {"status": ["error"]}});
        let payloads = [
            r#"{"detail":{"status":"error","code":1}}"#,
            r#"{"detail":{"status":"ok"}}"#,
            r#"{"status":"error"}"#,
            r#"{"detail":"error"}"#,
            r#"{"detail":{"status":["ok","error"]}}"#,
            r#"{"detail":[{"status":"ok"},{"status":"error"}]}"#,
        ];
        assert_eq!(
            hits(filter, &payloads),
            [true, false, false, false, true, true]
        );
        // The fields of one filter object match within one element of an array.
        let filter = json!({"items": {"sku": ["a"], "qty": [2]}});
        let payloads = [
            r#"{"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}"#,
            r#"{"items":[{"sku":"b"},{"sku":"a","qty":2}]}"#,
        ];
        assert_eq!(hits(filter, &payloads), [false, true]);
    }

    #[test]
    fn fields_and_and_values_or() {
        let filter = json!({"type": ["order", "refund"], "amount": [100]});
        let payloads = [
            r#"{"type":"order","amount":100}"#,
            r#"{"type":"refund","amount":100}"#,
            r#"{"type":"order","amount":99}"#,
            r#"{"type":"quote","amount":100}"#,
            r#"{"type":"order"}"#,
        ];
        assert_eq!(hits(filter, &payloads), [true, true, false, false, false]);
    }

    #[test]
    fn string_matchers() {
        let payloads = [
            r#"{"a":"order.created"}"#,
            r#"{"a":"refund.created"}"#,
            r#"{"a":5}"#,
            r#"{"b":"order."}"#,
        ];
        assert_eq!(
            hits(json!({"a": [{"prefix": "order."}]}), &payloads),
            [true, false, false, false]
        );
        assert_eq!(
            hits(json!({"a": [{"suffix": ".created"}]}), &payloads),
            [true, true, false, false]
        );
        let payloads = [r#"{"a":"ÉTÉ"}"#, r#"{"a":"été"}"#, r#"{"a":"ete"}"#];
        assert_eq!(
            hits(json!({"a": [{"equals-ignore-case": "Été"}]}), &payloads),
            [true, true, false]
        );
        assert_eq!(
            hits(
                json!({"a": [{"prefix": "1"}]}),
                &[r#"{"a":15}"#, r#"{"a":"15"}"#]
            ),
            [false, true]
        );
    }

    #[test]
    fn anything_but() {
        let payloads = [
            r#"{"a":"x"}"#,
            r#"{"a":"y"}"#,
            r#"{"a":"z"}"#,
            r#"{"a":5}"#,
            r#"{"a":null}"#,
            r#"{"b":"z"}"#,
        ];
        let expected = [false, false, true, true, true, false];
        assert_eq!(
            hits(json!({"a": [{"anything-but": ["x", "y"]}]}), &payloads),
            expected
        );
        let expected = [false, true, true, true, true, false];
        assert_eq!(
            hits(json!({"a": [{"anything-but": "x"}]}), &payloads),
            expected
        );
        let payloads = [r#"{"a":5}"#, r#"{"a":5.0}"#, r#"{"a":6}"#, r#"{"a":"5"}"#];
        assert_eq!(
            hits(json!({"a": [{"anything-but": [5, 7]}]}), &payloads),
            [false, false, true, true]
        );
        assert_eq!(
            hits(json!({"a": [{"anything-but": 5}]}), &payloads),
            [false, false, true, true]
        );
        // An array matches when any element is not excluded.
        let payloads = [r#"{"a":["x","y"]}"#, r#"{"a":["x","z"]}"#];
        assert_eq!(
            hits(json!({"a": [{"anything-but": ["x", "y"]}]}), &payloads),
            [false, true]
        );
    }

    #[test]
    fn numeric_comparisons() {
        let numbers = |filter: Value| {
            let payloads = [
                "-1e300", "-1", "0", "99.5", "100", "100.0", "150", "200", "1e300", "\"150\"",
            ];
            let payloads: Vec<String> =
                payloads.iter().map(|n| format!(r#"{{"a":{n}}}"#)).collect();
            let payloads: Vec<&str> = payloads.iter().map(String::as_str).collect();
            hits(json!({"a": [{"numeric": filter}]}), &payloads)
        };
        let (t, f) = (true, false);
        assert_eq!(numbers(json!([">", 100])), [f, f, f, f, f, f, t, t, t, f]);
        assert_eq!(numbers(json!([">=", 100])), [f, f, f, f, t, t, t, t, t, f]);
        assert_eq!(numbers(json!(["<", 100])), [t, t, t, t, f, f, f, f, f, f]);
        assert_eq!(numbers(json!(["<=", 100])), [t, t, t, t, t, t, f, f, f, f]);
        assert_eq!(numbers(json!(["=", 100])), [f, f, f, f, t, t, f, f, f, f]);
        assert_eq!(
            numbers(json!([">", 100, "<", 200])),
            [f, f, f, f, f, f, t, f, f, f]
        );
        assert_eq!(
            numbers(json!([">=", 100, "<=", 200])),
            [f, f, f, f, t, t, t, t, f, f]
        );
        assert_eq!(
            numbers(json!([">", -1, "<=", 99.5])),
            [f, f, t, t, f, f, f, f, f, f]
        );
        assert_eq!(
            numbers(json!([">", 0, "<", 100])),
            [f, f, f, t, f, f, f, f, f, f]
        );
        // Quamina takes a bare upper bound for any string, boolean or null: not here.
        let others = [
            r#"{"a":"x"}"#,
            r#"{"a":null}"#,
            r#"{"a":true}"#,
            r#"{"a":[]}"#,
        ];
        assert_eq!(
            hits(json!({"a": [{"numeric": ["<", 10]}]}), &others),
            [false; 4]
        );
        // A -0 in a filter is 0.
        let zeros = [r#"{"a":0}"#, r#"{"a":0.0}"#, r#"{"a":1}"#];
        assert_eq!(hits(json!({"a": [-0.0]}), &zeros), [true, true, false]);
        assert_eq!(
            hits(json!({"a": [{"numeric": [">", -0.0]}]}), &zeros),
            [false, false, true]
        );
    }

    #[test]
    fn exists() {
        let payloads = [
            r#"{"a":1}"#,
            r#"{"a":null}"#,
            r#"{"a":{"b":1}}"#,
            r#"{"a":[]}"#,
            r#"{"a":[1]}"#,
            r#"{"b":1}"#,
            r#"{}"#,
        ];
        let expected = [true, true, false, false, true, false, false];
        assert_eq!(hits(json!({"a": [{"exists": true}]}), &payloads), expected);
        let expected = expected.map(|e| !e);
        assert_eq!(hits(json!({"a": [{"exists": false}]}), &payloads), expected);
        // Nested, with a parent missing or of another shape.
        let payloads = [
            r#"{"a":{"b":1}}"#,
            r#"{"a":{"c":1}}"#,
            r#"{"a":5}"#,
            r#"{"x":1}"#,
        ];
        assert_eq!(
            hits(json!({"a": {"b": [{"exists": true}]}}), &payloads),
            [true, false, false, false]
        );
        assert_eq!(
            hits(json!({"a": {"b": [{"exists": false}]}}), &payloads),
            [false, true, true, true]
        );
    }

    #[test]
    fn exists_false_after_other_exists() {
        // Quamina 0.7.0 misses these without the field every payload gets (`LAST`).
        let payloads = [r#"{"a":1}"#, r#"{"a":1,"b":2}"#, r#"{"b":2}"#, r#"{"z":1}"#];
        let filter = json!({"a": [{"exists": true}], "b": [{"exists": false}]});
        assert_eq!(hits(filter, &payloads), [true, false, false, false]);
        let filter = json!({"a": [{"exists": false}], "b": [{"exists": false}]});
        assert_eq!(hits(filter, &payloads), [false, false, false, true]);
        let filter = json!({"a": [1], "b": [{"exists": true}], "c": [{"exists": false}]});
        assert_eq!(
            hits(filter, &[r#"{"a":1,"b":2}"#, r#"{"a":1,"b":2,"c":3}"#]),
            [true, false]
        );
    }

    #[test]
    fn arrays_mixing_exact_values_and_matchers() {
        // Quamina 0.7.0 alone matches "V1" here (the exact "v1" after the merged matcher).
        let filter = json!({"a": [{"equals-ignore-case": "V0"}, 1, "v2", "v1"]});
        let payloads = [
            r#"{"a":"V1"}"#,
            r#"{"a":"v1"}"#,
            r#"{"a":"V0"}"#,
            r#"{"a":1}"#,
            r#"{"a":2}"#,
        ];
        assert_eq!(hits(filter, &payloads), [false, true, true, true, false]);
        let filter = json!({"a": ["x", {"numeric": [">", 10]}], "b": [{"prefix": "p"}, true]});
        let payloads = [
            r#"{"a":"x","b":true}"#,
            r#"{"a":11,"b":"pq"}"#,
            r#"{"a":10,"b":true}"#,
        ];
        assert_eq!(hits(filter, &payloads), [true, true, false]);
    }

    #[test]
    fn refused_filters_name_the_path() {
        let cases = [
            (json!(["x"]), "filter: a filter must be an object of fields"),
            (
                json!({}),
                "filter: a filter needs at least one field (leave the filter out to receive every message)",
            ),
            (
                json!({"amount": 5}),
                "filter.amount: a field's value must be an array of accepted values or an object of fields",
            ),
            (
                json!({"a": {}}),
                "filter.a: an object of fields needs at least one field",
            ),
            (
                json!({"a": []}),
                "filter.a: an array of accepted values cannot be empty",
            ),
            (
                json!({"detail": {"codes": [1, 2, [3]]}}),
                "filter.detail.codes[2]: an accepted value is a string, number, boolean, null or matcher object, not an array",
            ),
            (
                json!({"a": [{"prefix": "x", "suffix": "y"}]}),
                "filter.a[0]: a matcher object has exactly one key, one of: prefix, suffix, equals-ignore-case, anything-but, numeric, exists",
            ),
            (
                json!({"a": [{"wildcard": "*x"}]}),
                "filter.a[0]: unknown matcher \"wildcard\" (the matchers are prefix, suffix, equals-ignore-case, anything-but, numeric, exists)",
            ),
            (
                json!({"a": ["x", {"prefix": 1}]}),
                "filter.a[1]: \"prefix\" takes a string",
            ),
            (
                json!({"a": [{"suffix": null}]}),
                "filter.a[0]: \"suffix\" takes a string",
            ),
            (
                json!({"a": [{"equals-ignore-case": ["x"]}]}),
                "filter.a[0]: \"equals-ignore-case\" takes a string",
            ),
            (
                json!({"a": [{"exists": "yes"}]}),
                "filter.a[0]: \"exists\" takes true or false",
            ),
            (
                json!({"a": [{"exists": true}, "x"]}),
                "filter.a: \"exists\" must be the only value of its array",
            ),
            (
                json!({"detail": {"status": ["ok", {"numeric": [">", "1"]}]}}),
                "filter.detail.status[1]: \"numeric\" takes pairs of an operator (<, <=, =, >=, >) and a number",
            ),
            (
                json!({"a": [{"numeric": ["<", 1, ">", 0]}]}),
                "filter.a[0]: \"numeric\" with two comparisons takes a lower bound (> or >=), then an upper bound (< or <=)",
            ),
            (
                json!({"a": [{"numeric": [">", 5, "<", 5]}]}),
                "filter.a[0]: \"numeric\" needs its lower bound below its upper bound",
            ),
        ];
        for (filter, message) in cases {
            assert_eq!(error(filter), message);
        }
        let numeric =
            "filter.a[0]: \"numeric\" takes pairs of an operator (<, <=, =, >=, >) and a number";
        for bad in [
            json!([]),
            json!([">"]),
            json!(["!=", 1]),
            json!([">", 1, "<"]),
            json!(5),
            json!([">", 1, "<", 2, "=", 3]),
        ] {
            assert_eq!(error(json!({"a": [{"numeric": bad}]})), numeric);
        }
        let anything_but = "filter.a[0]: \"anything-but\" takes a string, a number, or a non-empty array of strings or of numbers";
        for bad in [
            json!([]),
            json!(["x", 1]),
            json!(true),
            json!([null]),
            json!({"prefix": "x"}),
        ] {
            assert_eq!(error(json!({"a": [{"anything-but": bad}]})), anything_but);
        }
    }

    #[test]
    fn refused_names_and_sizes() {
        let name = "a field name cannot contain \".\" or a line break, nor start with U+10FFFF";
        assert_eq!(
            error(json!({"a": {"b.c": ["x"]}})),
            format!("filter.a.b.c: {name}")
        );
        assert_eq!(
            error(json!({"a\nb": ["x"]})),
            format!("filter.a\nb: {name}")
        );

        let mut deep = json!(["x"]);
        for level in (1..=16).rev() {
            deep = json!({ format!("l{level}"): deep });
        }
        assert!(Pattern::parse(&deep).is_ok());
        let deeper = json!({"l0": deep});
        let path: String = (0..=15).map(|level| format!(".l{level}")).collect();
        assert_eq!(
            error(deeper),
            format!("filter{path}: a filter nests at most 16 objects")
        );

        let fields =
            |n: usize| Value::Object((0..n).map(|i| (format!("f{i}"), json!([i]))).collect());
        assert!(Pattern::parse(&fields(64)).is_ok());
        assert_eq!(
            error(fields(65)),
            "filter: a filter matches at most 64 fields"
        );

        let values: Vec<usize> = (0..257).collect();
        assert!(Pattern::parse(&json!({"a": &values[..256]})).is_ok());
        assert_eq!(
            error(json!({"a": values})),
            "filter.a: an array holds at most 256 accepted values"
        );

        let matchers: Vec<Value> = (0..33)
            .map(|i| json!({"prefix": format!("p{i}")}))
            .collect();
        assert!(Pattern::parse(&json!({"a": &matchers[..32]})).is_ok());
        assert_eq!(
            error(json!({"a": matchers})),
            "filter.a: an array holds at most 32 matcher objects"
        );

        let prefixes: Vec<Value> = (0..16)
            .map(|i| json!({"prefix": format!("p{i}")}))
            .collect();
        assert!(Pattern::parse(&json!({"a": prefixes, "b": prefixes, "c": ["x", "y"]})).is_ok());
        assert_eq!(
            error(json!({"a": prefixes, "b": prefixes, "c": [1, 2]})),
            "filter: the numbers and matcher objects of a filter's arrays combine in at most \
             256 ways, not 512"
        );
        assert!(Pattern::from_stored(r#"{"a":[1e400]}"#).is_err());

        let mixed = json!(["x", {"prefix": "y"}]);
        assert!(Pattern::parse(&json!({"a": mixed, "b": mixed})).is_ok());
        assert_eq!(
            error(json!({"a": mixed, "b": mixed, "c": mixed})),
            "filter.c: at most 2 arrays of a filter can mix exact values with matcher objects"
        );

        let long = "x".repeat(200);
        let big = Value::Object((0..40).map(|i| (format!("f{i}"), json!([long]))).collect());
        let length = big.to_string().len();
        assert_eq!(
            error(big),
            format!("filter: a filter is at most 8192 bytes of JSON, not {length}")
        );
    }

    #[test]
    fn stored_text_round_trips() {
        let filter = json!({"detail": {"status": ["ok", "ok", {"numeric": [">=", 1.5]}]}, "type": [true, null]});
        let pattern = pattern(filter);
        // Compact, keys in the order given, repeated values dropped.
        let text = r#"{"detail":{"status":["ok",{"numeric":[">=",1.5]}]},"type":[true,null]}"#;
        assert_eq!(pattern.as_str(), text);
        assert_eq!(
            pattern.to_value(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        let stored = Pattern::from_stored(pattern.as_str()).unwrap();
        assert_eq!(stored, pattern);
        assert_eq!(stored.as_str(), text);
        let err = Pattern::from_stored("{\"a\":").unwrap_err();
        assert_eq!(err.path, "filter");
        assert!(err.problem.starts_with("not JSON: "), "{}", err.problem);
        assert_eq!(
            Pattern::from_stored(r#"{"a":[]}"#).unwrap_err().path,
            "filter.a"
        );
    }

    #[test]
    fn set_returns_matching_and_unfiltered_keys_in_order() {
        let order = pattern(json!({"type": ["order"]}));
        let big = pattern(json!({"amount": [{"numeric": [">", 100]}]}));
        let set = PatternSet::new([
            ("big", Some(big.clone())),
            ("all", None),
            ("orders", Some(order.clone())),
            ("big", Some(order.clone())), // a key given twice: either pattern
            ("orders-too", Some(order)),
            ("all", None),
        ]);
        assert_eq!(set.len(), 4);
        assert!(!set.is_empty());
        assert_eq!(
            set.matches(r#"{"type":"order","amount":5}"#),
            ["big", "all", "orders", "orders-too"]
        );
        assert_eq!(
            set.matches(r#"{"type":"refund","amount":500}"#),
            ["big", "all"]
        );
        assert_eq!(set.matches(r#"{"type":"refund"}"#), ["all"]);
        // Unreadable by quamina: the unfiltered keys only.
        for payload in [
            "",
            "not json",
            "[1]",
            r#""text""#,
            r#"{"type":"order""#,
            r#"{"type":}"#,
        ] {
            assert_eq!(set.matches(payload), ["all"], "{payload}");
        }
        let empty = PatternSet::<u32>::new([]);
        assert!(empty.is_empty());
        assert!(empty.matches("{}").is_empty());
        let unfiltered = PatternSet::new([(1, None), (2, None)]);
        assert_eq!(unfiltered.matches("oops"), [1, 2]);
    }

    #[test]
    fn set_of_many_patterns_returns_the_one_matching() {
        let entries =
            (0..10_000).map(|i| (i, Some(pattern(json!({"user": [format!("user-{i}")]})))));
        let set = PatternSet::new(entries);
        assert_eq!(set.shards.len(), 1);
        assert_eq!(set.matches(r#"{"user":"user-4242","other":1}"#), [4242]);
        assert!(set.matches(r#"{"user":"user-10000"}"#).is_empty());
    }

    #[test]
    fn set_shards_what_quamina_cannot_hold_in_one_automaton() {
        // 600 patterns on one shared number: one automaton state would lead to 600 next
        // fields, past the 255 quamina 0.7.0 holds (it panics).
        let entries: Vec<_> = (0..600)
            .map(|i| (i, Some(pattern(json!({"a": [5], "b": [format!("b{i}")]})))))
            .collect();
        let set = PatternSet::new(entries.clone());
        assert_eq!(set.shards.len(), 3);
        assert_eq!(set.matches(r#"{"a":5,"b":"b599"}"#), [599]);
        assert_eq!(set.matches(r#"{"a":5.0,"b":"b7"}"#), [7]);
        assert!(set.matches(r#"{"a":6,"b":"b7"}"#).is_empty());
        // Identical patterns are compiled once.
        let same = PatternSet::new((0..600).map(|i| (i, Some(pattern(json!({"a": [5]}))))));
        assert_eq!(same.groups.len(), 1);
        assert_eq!(same.matches(r#"{"a":5}"#).len(), 600);
        // Should the count let too many through, the automaton is built in halves.
        let alternatives: Vec<(usize, Vec<Part>)> = entries
            .iter()
            .flat_map(|(i, p)| {
                p.as_ref()
                    .unwrap()
                    .alternatives()
                    .into_iter()
                    .map(move |parts| (*i, parts))
            })
            .collect();
        assert!(build(alternatives.iter().map(|(i, parts)| (*i, parts)).collect()).is_err());
        let shards = compile(&alternatives);
        assert!(shards.len() >= 3);
        let matched: Vec<usize> = shards
            .iter()
            .flat_map(|shard| {
                shard
                    .matches_for_event(with_last(r#"{"a":5,"b":"b3"}"#).unwrap().as_bytes())
                    .unwrap()
            })
            .collect();
        assert_eq!(matched, [3]);
    }

    #[test]
    fn set_order_does_not_matter_to_quamina() {
        // Quamina 0.7.0 inserts an exact value added after a merged matcher wrongly.
        let cases = [
            (
                json!({"t": [{"anything-but": ["x"]}]}),
                json!({"t": ["y"]}),
                r#"{"t":"z"}"#,
            ),
            (
                json!({"t": [{"equals-ignore-case": "Ab"}]}),
                json!({"t": ["ab"]}),
                r#"{"t":"AB"}"#,
            ),
            (
                json!({"t": [{"numeric": ["<", 10]}]}),
                json!({"t": [2]}),
                r#"{"t":5}"#,
            ),
            (
                json!({"t": [{"anything-but": 2}]}),
                json!({"t": [2]}),
                r#"{"t":5}"#,
            ),
        ];
        for (matcher, exact, payload) in cases {
            let set = PatternSet::new([
                ("matcher", Some(pattern(matcher))),
                ("exact", Some(pattern(exact))),
            ]);
            assert_eq!(set.matches(payload), ["matcher"], "{payload}");
        }
    }

    #[test]
    fn set_is_shareable_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<PatternSet<String>>();
        shareable::<Pattern>();
    }
}
