//! The tensors of a model directory's safetensors files: `model.safetensors`, or the shards
//! `model.safetensors.index.json` names (else every `model*.safetensors` there). Only the
//! headers are read when opened (parsed by the `safetensors` crate); a tensor's bytes are read
//! from its file when asked for, so a model is never held whole in host memory.

use super::DecodeError;
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::Dtype;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Largest header accepted (the format's own bound is 100 MB).
const MAX_HEADER: u64 = 100 << 20;

/// One safetensors file: where its data starts.
#[derive(Debug)]
struct Shard {
    path: PathBuf,
    data_start: u64,
}

/// Where a tensor lies: its shard, dtype, shape and byte range in the shard's data.
#[derive(Clone, Debug)]
struct Entry {
    shard: usize,
    info: TensorInfo,
}

/// The tensors of one model directory, by name.
#[derive(Debug)]
pub struct SafetensorsDir {
    shards: Vec<Shard>,
    tensors: HashMap<String, Entry>,
}

fn file_err(path: &Path, why: impl std::fmt::Display) -> DecodeError {
    DecodeError::File {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

/// The shard files of `dir`: those the index names, else `model*.safetensors` (sorted).
fn shard_paths(dir: &Path) -> Result<Vec<PathBuf>, DecodeError> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let json = super::mlx_config::read_json(&index)?;
        let map = json
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| file_err(&index, "no `weight_map` object"))?;
        let mut files: Vec<PathBuf> = vec![];
        for (tensor, file) in map {
            let name = file
                .as_str()
                .filter(|f| !f.contains(['/', '\\']) && f.ends_with(".safetensors"))
                .ok_or_else(|| file_err(&index, format!("`{tensor}` maps to {file}")))?;
            let path = dir.join(name);
            if !files.contains(&path) {
                files.push(path);
            }
        }
        files.sort();
        return Ok(files);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| file_err(dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("model") && name.ends_with(".safetensors") && p.is_file()
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(file_err(dir, "no model*.safetensors file"));
    }
    Ok(files)
}

/// The header of the safetensors file at `path` and the offset of its data, every tensor's
/// byte range checked against its dtype, shape and the file's length.
fn read_header(path: &Path) -> Result<(Metadata, u64), DecodeError> {
    let mut f = File::open(path).map_err(|e| file_err(path, e))?;
    let file_len = f.metadata().map_err(|e| file_err(path, e))?.len();
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(|e| file_err(path, e))?;
    let n = u64::from_le_bytes(len);
    if n > MAX_HEADER || 8 + n > file_len {
        return Err(file_err(path, format!("header length {n} is impossible")));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).map_err(|e| file_err(path, e))?;
    let meta: Metadata = serde_json::from_slice(&header)
        .map_err(|e| file_err(path, format!("bad safetensors header: {e}")))?;
    let data_len = file_len - 8 - n;
    for (name, info) in meta.tensors() {
        let (start, end) = info.data_offsets;
        let bytes = info
            .shape
            .iter()
            .try_fold(info.dtype.size(), |n, &d| n.checked_mul(d));
        if bytes != end.checked_sub(start) || end as u64 > data_len {
            return Err(file_err(
                path,
                format!(
                    "tensor `{name}`: {:?} {:?} does not fit bytes {start}..{end} of {data_len}",
                    info.dtype, info.shape
                ),
            ));
        }
    }
    Ok((meta, 8 + n))
}

impl SafetensorsDir {
    /// Reads the headers of `dir`'s safetensors files; a tensor in two shards is refused.
    pub fn open(dir: &Path) -> Result<SafetensorsDir, DecodeError> {
        let mut shards = vec![];
        let mut tensors = HashMap::new();
        for path in shard_paths(dir)? {
            let (meta, data_start) = read_header(&path)?;
            for (name, info) in meta.tensors() {
                let entry = Entry {
                    shard: shards.len(),
                    info: info.clone(),
                };
                if tensors.insert(name.clone(), entry).is_some() {
                    return Err(file_err(&path, format!("tensor `{name}` is in two files")));
                }
            }
            shards.push(Shard { path, data_start });
        }
        Ok(SafetensorsDir { shards, tensors })
    }

    /// Whether `name` is stored.
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// `name`'s dtype and shape (outermost dim first).
    pub fn info(&self, name: &str) -> Option<(Dtype, &[usize])> {
        self.tensors
            .get(name)
            .map(|e| (e.info.dtype, e.info.shape.as_slice()))
    }

    /// Every stored name with its dtype and shape, sorted by name.
    pub fn list(&self) -> BTreeMap<&str, (Dtype, &[usize])> {
        self.tensors
            .iter()
            .map(|(n, e)| (n.as_str(), (e.info.dtype, e.info.shape.as_slice())))
            .collect()
    }

    /// The bytes of `name` (little-endian, row-major), read from its file now.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, DecodeError> {
        let entry = self
            .tensors
            .get(name)
            .ok_or_else(|| DecodeError::MissingTensor(name.to_string()))?;
        let shard = &self.shards[entry.shard];
        let (start, end) = entry.info.data_offsets;
        let mut f = File::open(&shard.path).map_err(|e| file_err(&shard.path, e))?;
        f.seek(SeekFrom::Start(shard.data_start + start as u64))
            .map_err(|e| file_err(&shard.path, e))?;
        let mut bytes = vec![0u8; end - start];
        f.read_exact(&mut bytes)
            .map_err(|e| file_err(&shard.path, format!("tensor `{name}`: {e}")))?;
        Ok(bytes)
    }
}
