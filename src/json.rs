//! PLACEHOLDER until the canonical JSON writer lands (helper is writing it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalJson(String);
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("{0}")]
    Malformed(String),
}
pub fn canonicalize(input: &[u8]) -> Result<CanonicalJson, JsonError> {
    let v: serde_json::Value =
        serde_json::from_slice(input).map_err(|e| JsonError::Malformed(e.to_string()))?;
    Ok(CanonicalJson(v.to_string()))
}
impl CanonicalJson {
    pub fn as_str(&self) -> &str { &self.0 }
    pub fn into_string(self) -> String { self.0 }
    pub fn len(&self) -> usize { self.0.len() }
    pub fn is_object(&self) -> bool { self.0.starts_with('{') }
    pub fn from_stored(s: String) -> Self { Self(s) }
}
