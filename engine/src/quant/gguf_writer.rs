//! A small GGUF writer, so tests can build synthetic files of every type [`GgufFile`] reads.
//!
//! It writes what ggml writes: the header, the metadata in insertion order, the tensor infos
//! with offsets assigned in order, padding to the alignment, then each tensor's bytes padded to
//! the alignment. It does not refuse duplicate keys, so tests can build invalid files.
//!
//! [`GgufFile`]: super::GgufFile

use super::{GgmlType, GgufError, MetaValue, DEFAULT_ALIGNMENT};
use std::path::Path;

/// A GGUF file under construction.
#[derive(Clone, Debug)]
pub struct GgufWriter {
    version: u32,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter::new()
    }
}

impl GgufWriter {
    /// An empty version 3 file.
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Writes `version` into the header (2 and 3 share their layout).
    pub fn set_version(&mut self, version: u32) {
        self.version = version;
    }

    /// Sets `general.alignment` (a u32, as ggml writes it), which places the data.
    pub fn set_alignment(&mut self, alignment: u32) {
        self.metadata.retain(|(k, _)| k != "general.alignment");
        self.add_metadata("general.alignment", MetaValue::U32(alignment));
    }

    /// Appends a key/value pair.
    pub fn add_metadata(&mut self, key: &str, value: MetaValue) {
        self.metadata.push((key.to_string(), value));
    }

    /// Appends a tensor with ggml dims (row length first); refuses bytes that do not match a
    /// known type's size.
    pub fn add_tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ggml_type: GgmlType,
        bytes: Vec<u8>,
    ) -> Result<(), GgufError> {
        let elements = dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
        if ggml_type.block().is_some() {
            let expected = elements.and_then(|n| ggml_type.tensor_bytes(n));
            if expected != Some(bytes.len() as u64) {
                return Err(GgufError::Write(format!(
                    "tensor {name}: {} bytes for dims {dims:?} of {ggml_type} (needs {expected:?})",
                    bytes.len()
                )));
            }
        }
        self.tensors
            .push((name.to_string(), dims.to_vec(), ggml_type, bytes));
        Ok(())
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let alignment = match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT as usize,
            Some((_, v)) => match v.as_u64() {
                Some(a) if a.is_power_of_two() => a as usize,
                _ => return Err(GgufError::Write(format!("general.alignment is {v:?}"))),
            },
        };
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            write_string(&mut out, key);
            out.extend_from_slice(&value.value_type().id().to_le_bytes());
            write_value(&mut out, value)?;
        }
        let mut offset = 0usize;
        for (name, dims, ggml_type, bytes) in &self.tensors {
            write_string(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ggml_type.id().to_le_bytes());
            out.extend_from_slice(&(offset as u64).to_le_bytes());
            offset += bytes.len().next_multiple_of(alignment);
        }
        for (_, _, _, bytes) in &self.tensors {
            out.resize(out.len().next_multiple_of(alignment), 0);
            out.extend_from_slice(bytes);
        }
        // ggml pads the last tensor too: its reader expects every tensor's padded size.
        if !self.tensors.is_empty() {
            out.resize(out.len().next_multiple_of(alignment), 0);
        }
        Ok(out)
    }

    /// Writes the file to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), GgufError> {
        std::fs::write(path.as_ref(), self.to_bytes()?).map_err(|source| GgufError::Io {
            path: path.as_ref().display().to_string(),
            source,
        })
    }
}

fn write_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn write_value(out: &mut Vec<u8>, v: &MetaValue) -> Result<(), GgufError> {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.push(*x as u8),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(*x as u8),
        MetaValue::String(s) => write_string(out, s),
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Array { item_type, items } => {
            out.extend_from_slice(&item_type.id().to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                if item.value_type() != *item_type {
                    return Err(GgufError::Write(format!(
                        "an array of {item_type:?} holds a {:?}",
                        item.value_type()
                    )));
                }
                write_value(out, item)?;
            }
        }
    }
    Ok(())
}
