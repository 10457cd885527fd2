//! A GGUF v2/v3 reader: header, metadata, tensor infos, and each tensor's bytes.
//!
//! Layout (little-endian): `"GGUF"`, version u32, tensor count u64, metadata count u64, the
//! key/value pairs (key string, value type u32, value), the tensor infos (name string, n_dims
//! u32, dims u64 each with the row length first, ggml type u32, offset u64 into the data
//! section), padding to `general.alignment` (default 32), then the data section. Strings are a
//! u64 byte length then UTF-8; arrays are an item type u32, a u64 count, then the items.
//!
//! Every count and length read is checked against the bytes left in the file before anything
//! is allocated, so a corrupted length fails with [`GgufError::Length`] instead of allocating.

use super::{GgmlType, GgufError, MetaValue, ValueType, DEFAULT_ALIGNMENT};
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// The most dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;
/// How deep arrays of arrays may nest (each level costs the parser a stack frame).
const MAX_NESTING: usize = 8;
/// The most items reserved ahead of reading them (the rest grow as bytes actually arrive).
const RESERVE_LIMIT: usize = 1 << 16;
/// The smallest tensor info: name length, n_dims, type and offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
/// The smallest key/value pair: key length, value type and a one-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;

/// One tensor's entry in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub name: String,
    /// ggml's dims: the row length first (`ne[0]`), then rows, and so on.
    pub dims: Vec<u64>,
    /// The element or block type.
    pub ggml_type: GgmlType,
    /// Where the data starts, in bytes from the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// The element count; `None` if it overflows.
    pub fn elements(&self) -> Option<u64> {
        self.dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d))
    }

    /// The data's byte length; `None` for an unknown type, rows that are not whole blocks, or
    /// an overflowing size.
    pub fn byte_len(&self) -> Option<u64> {
        let (per_block, _) = self.ggml_type.block()?;
        if self
            .dims
            .first()
            .is_some_and(|&row| !row.is_multiple_of(per_block))
        {
            return None;
        }
        self.ggml_type.tensor_bytes(self.elements()?)
    }
}

/// Where the tensor bytes come from.
enum Source {
    File(File),
    Bytes(Vec<u8>),
}

/// An open GGUF file: its metadata and tensor infos, parsed and checked, and its tensors' bytes
/// on demand.
pub struct GgufFile {
    name: String,
    version: u32,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<TensorInfo>,
    alignment: u64,
    data_offset: u64,
    len: u64,
    source: Source,
}

impl GgufFile {
    /// Opens and parses the file at `path`; tensor bytes are read from it on demand.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let name = path.as_ref().display().to_string();
        let io = |source| GgufError::Io {
            path: name.clone(),
            source,
        };
        let file = File::open(path.as_ref()).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut parser = Parser::new(BufReader::new(&file), len, &name);
        let header = parser.header()?;
        Self::assemble(name, header, len, Source::File(file))
    }

    /// Parses a GGUF file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        let name = "<memory>".to_string();
        let len = bytes.len() as u64;
        let header = Parser::new(bytes.as_slice(), len, &name).header()?;
        Self::assemble(name, header, len, Source::Bytes(bytes))
    }

    fn assemble(name: String, h: Header, len: u64, source: Source) -> Result<Self, GgufError> {
        for t in &h.tensors {
            check_placement(t, h.alignment, h.data_offset, len)?;
        }
        Ok(GgufFile {
            name,
            version: h.version,
            metadata: h.metadata,
            tensors: h.tensors,
            alignment: h.alignment,
            data_offset: h.data_offset,
            len,
            source,
        })
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Every key/value pair, in file order.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Every tensor's info, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The info of the tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The alignment of the data section and of each tensor in it.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Where the data section starts, in bytes from the start of the file.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Reads the bytes of the tensor named `name`.
    pub fn tensor_data(&mut self, name: &str) -> Result<Vec<u8>, GgufError> {
        let info = self
            .tensor(name)
            .ok_or_else(|| GgufError::NoTensor(name.to_string()))?;
        let len = info.byte_len().ok_or_else(|| GgufError::Tensor {
            tensor: name.to_string(),
            why: format!("{} has no known byte size", info.ggml_type),
        })?;
        // Placement was checked at open: start + len lies inside the file.
        let start = self.data_offset + info.offset;
        match &mut self.source {
            Source::Bytes(bytes) => Ok(bytes[start as usize..(start + len) as usize].to_vec()),
            Source::File(file) => {
                let io = |source| GgufError::Io {
                    path: self.name.clone(),
                    source,
                };
                let mut out = vec![0u8; len as usize];
                file.seek(SeekFrom::Start(start)).map_err(io)?;
                file.read_exact(&mut out).map_err(io)?;
                Ok(out)
            }
        }
    }

    /// The file's length in bytes.
    pub fn file_len(&self) -> u64 {
        self.len
    }
}

/// Checks a tensor's offset alignment and, for known types, that its bytes lie in the file.
fn check_placement(t: &TensorInfo, alignment: u64, data: u64, len: u64) -> Result<(), GgufError> {
    let fail = |why: String| {
        Err(GgufError::Tensor {
            tensor: t.name.clone(),
            why,
        })
    };
    if !t.offset.is_multiple_of(alignment) {
        return fail(format!(
            "offset {} is not a multiple of the alignment {alignment}",
            t.offset
        ));
    }
    let Some((per_block, _)) = t.ggml_type.block() else {
        return Ok(()); // An unknown type's size is unknown; reading it is refused.
    };
    let Some(bytes) = t.byte_len() else {
        return fail(format!(
            "dims {:?} are not whole {} blocks of {per_block} (or overflow)",
            t.dims, t.ggml_type
        ));
    };
    match data
        .checked_add(t.offset)
        .and_then(|s| s.checked_add(bytes))
    {
        Some(end) if end <= len => Ok(()),
        _ => fail(format!(
            "{bytes} bytes at offset {} run past the end of the {len}-byte file",
            t.offset
        )),
    }
}

/// The parsed header.
struct Header {
    version: u32,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<TensorInfo>,
    alignment: u64,
    data_offset: u64,
}

/// Reads GGUF fields from `r`, tracking the position and refusing to read past `len`.
struct Parser<'a, R> {
    r: R,
    pos: u64,
    len: u64,
    name: &'a str,
}

impl<'a, R: Read> Parser<'a, R> {
    fn new(r: R, len: u64, name: &'a str) -> Self {
        Parser {
            r,
            pos: 0,
            len,
            name,
        }
    }

    fn header(&mut self) -> Result<Header, GgufError> {
        let magic = self.array::<4>("the magic")?;
        if &magic != b"GGUF" {
            return Err(GgufError::BadMagic(magic));
        }
        let version = self.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::Version(version));
        }
        let tensor_count = self.count("the tensor count", MIN_TENSOR_INFO_BYTES)?;
        let kv_count = self.count("the metadata count", MIN_KV_BYTES)?;
        let mut metadata = Vec::with_capacity(kv_count.min(RESERVE_LIMIT));
        let mut keys = HashSet::new();
        for _ in 0..kv_count {
            let key = self.string("a metadata key")?;
            let value_type = self.value_type()?;
            let value = self.value(value_type, 0)?;
            if !keys.insert(key.clone()) {
                return Err(GgufError::Duplicate {
                    what: "metadata key",
                    name: key,
                });
            }
            metadata.push((key, value));
        }
        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((_, v)) => match v.as_u64() {
                Some(a) if a.is_power_of_two() => a,
                _ => return Err(GgufError::Alignment(format!("{v:?}"))),
            },
        };
        let mut tensors = Vec::with_capacity(tensor_count.min(RESERVE_LIMIT));
        let mut names = HashSet::new();
        for _ in 0..tensor_count {
            let info = self.tensor_info()?;
            if !names.insert(info.name.clone()) {
                return Err(GgufError::Duplicate {
                    what: "tensor",
                    name: info.name,
                });
            }
            tensors.push(info);
        }
        let data_offset = self.pos.next_multiple_of(alignment);
        Ok(Header {
            version,
            metadata,
            tensors,
            alignment,
            data_offset,
        })
    }

    fn tensor_info(&mut self) -> Result<TensorInfo, GgufError> {
        let name = self.string("a tensor name")?;
        let at = self.pos;
        let n_dims = self.u32("a tensor's dimension count")?;
        if n_dims > MAX_DIMS {
            return Err(GgufError::Tensor {
                tensor: name,
                why: format!("{n_dims} dimensions at byte {at}, at most {MAX_DIMS} allowed"),
            });
        }
        let dims = (0..n_dims)
            .map(|_| self.u64("a tensor dimension"))
            .collect::<Result<Vec<_>, _>>()?;
        let ggml_type = GgmlType::from_id(self.u32("a tensor type")?);
        let offset = self.u64("a tensor offset")?;
        Ok(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
        })
    }

    fn value_type(&mut self) -> Result<ValueType, GgufError> {
        let at = self.pos;
        let id = self.u32("a value type")?;
        ValueType::from_id(id).ok_or(GgufError::ValueType { id, at })
    }

    fn value(&mut self, t: ValueType, depth: usize) -> Result<MetaValue, GgufError> {
        const W: &str = "a metadata value";
        Ok(match t {
            ValueType::U8 => MetaValue::U8(self.array::<1>(W)?[0]),
            ValueType::I8 => MetaValue::I8(self.array::<1>(W)?[0] as i8),
            ValueType::U16 => MetaValue::U16(u16::from_le_bytes(self.array(W)?)),
            ValueType::I16 => MetaValue::I16(i16::from_le_bytes(self.array(W)?)),
            ValueType::U32 => MetaValue::U32(self.u32(W)?),
            ValueType::I32 => MetaValue::I32(i32::from_le_bytes(self.array(W)?)),
            ValueType::F32 => MetaValue::F32(f32::from_le_bytes(self.array(W)?)),
            ValueType::U64 => MetaValue::U64(self.u64(W)?),
            ValueType::I64 => MetaValue::I64(i64::from_le_bytes(self.array(W)?)),
            ValueType::F64 => MetaValue::F64(f64::from_le_bytes(self.array(W)?)),
            ValueType::Bool => {
                let at = self.pos;
                match self.array::<1>(W)?[0] {
                    0 => MetaValue::Bool(false),
                    1 => MetaValue::Bool(true),
                    value => return Err(GgufError::Bool { at, value }),
                }
            }
            ValueType::String => MetaValue::String(self.string(W)?),
            ValueType::Array => {
                let at = self.pos;
                if depth >= MAX_NESTING {
                    return Err(GgufError::Nesting {
                        at,
                        limit: MAX_NESTING,
                    });
                }
                let item_type = self.value_type()?;
                let count = self.count("an array length", item_type.min_bytes())?;
                let mut items = Vec::with_capacity(count.min(RESERVE_LIMIT));
                for _ in 0..count {
                    items.push(self.value(item_type, depth + 1)?);
                }
                MetaValue::Array { item_type, items }
            }
        })
    }

    fn string(&mut self, what: &'static str) -> Result<String, GgufError> {
        let len = self.count(what, 1)?;
        let at = self.pos;
        let mut bytes = vec![0u8; len];
        self.fill(&mut bytes, what)?;
        String::from_utf8(bytes).map_err(|_| GgufError::Utf8 { at })
    }

    /// A u64 count of items of at least `item_bytes` each, refused if the rest of the file
    /// cannot hold that many.
    fn count(&mut self, what: &'static str, item_bytes: u64) -> Result<usize, GgufError> {
        let at = self.pos;
        let count = self.u64(what)?;
        let remaining = self.len.saturating_sub(self.pos);
        match count.checked_mul(item_bytes) {
            Some(bytes) if bytes <= remaining => {
                usize::try_from(count).map_err(|_| GgufError::Length {
                    what,
                    at,
                    count,
                    remaining,
                })
            }
            _ => Err(GgufError::Length {
                what,
                at,
                count,
                remaining,
            }),
        }
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], GgufError> {
        let mut out = [0u8; N];
        self.fill(&mut out, what)?;
        Ok(out)
    }

    fn fill(&mut self, out: &mut [u8], what: &'static str) -> Result<(), GgufError> {
        let truncated = GgufError::Truncated {
            what,
            at: self.pos,
            len: self.len,
        };
        if self.len.saturating_sub(self.pos) < out.len() as u64 {
            return Err(truncated);
        }
        match self.r.read_exact(out) {
            Ok(()) => {
                self.pos += out.len() as u64;
                Ok(())
            }
            // The file shrank under us.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(truncated),
            Err(source) => Err(GgufError::Io {
                path: self.name.to_string(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::GgufWriter;

    /// A file with every value type, nested and string arrays, and tensors of several types.
    fn sample() -> Vec<u8> {
        let mut w = GgufWriter::new();
        w.add_metadata("general.architecture", MetaValue::String("llama".into()));
        w.add_metadata("u8", MetaValue::U8(7));
        w.add_metadata("i8", MetaValue::I8(-7));
        w.add_metadata("u16", MetaValue::U16(700));
        w.add_metadata("i16", MetaValue::I16(-700));
        w.add_metadata("u32", MetaValue::U32(70_000));
        w.add_metadata("i32", MetaValue::I32(-70_000));
        w.add_metadata("f32", MetaValue::F32(0.25));
        w.add_metadata("bool", MetaValue::Bool(true));
        w.add_metadata("u64", MetaValue::U64(1 << 40));
        w.add_metadata("i64", MetaValue::I64(-(1 << 40)));
        w.add_metadata("f64", MetaValue::F64(-0.125));
        let strings = ["<s>", "</s>", "héllo", ""].map(|s| MetaValue::String(s.into()));
        w.add_metadata(
            "tokenizer.ggml.tokens",
            MetaValue::Array {
                item_type: ValueType::String,
                items: strings.to_vec(),
            },
        );
        let inner = MetaValue::Array {
            item_type: ValueType::I32,
            items: vec![MetaValue::I32(1), MetaValue::I32(-2)],
        };
        w.add_metadata(
            "nested",
            MetaValue::Array {
                item_type: ValueType::Array,
                items: vec![inner.clone(), inner],
            },
        );
        w.add_tensor("dense", &[4, 2], GgmlType::F32, (0..32).collect())
            .unwrap();
        w.add_tensor("q4", &[32, 2], GgmlType::Q4_1, vec![1; 40])
            .unwrap();
        w.add_tensor("q6", &[256], GgmlType::Q6K, vec![2; 210])
            .unwrap();
        w.to_bytes().unwrap()
    }

    #[test]
    fn writer_and_reader_round_trip() {
        let mut f = GgufFile::from_bytes(sample()).unwrap();
        assert_eq!(f.version(), 3);
        assert_eq!(f.alignment(), DEFAULT_ALIGNMENT);
        assert_eq!(f.data_offset() % 32, 0);
        assert_eq!(f.get("i64"), Some(&MetaValue::I64(-(1 << 40))));
        assert_eq!(f.get("u16").and_then(MetaValue::as_u64), Some(700));
        assert_eq!(
            f.get("tokenizer.ggml.tokens")
                .and_then(MetaValue::as_strings),
            Some(vec!["<s>", "</s>", "héllo", ""])
        );
        assert_eq!(
            f.get("nested")
                .and_then(MetaValue::as_array)
                .map(<[_]>::len),
            Some(2)
        );
        let names: Vec<_> = f.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["dense", "q4", "q6"]);
        assert_eq!(f.tensor("q6").unwrap().ggml_type, GgmlType::Q6K);
        assert!(f.tensors().iter().all(|t| t.offset % 32 == 0));
        assert_eq!(
            f.tensor_data("dense").unwrap(),
            (0..32).collect::<Vec<u8>>()
        );
        assert_eq!(f.tensor_data("q4").unwrap(), vec![1; 40]);
        assert_eq!(f.tensor_data("q6").unwrap(), vec![2; 210]);
        assert!(matches!(f.tensor_data("nope"), Err(GgufError::NoTensor(_))));
    }

    #[test]
    fn general_alignment_moves_the_data_section() {
        let mut w = GgufWriter::new();
        w.set_alignment(256);
        w.add_tensor("a", &[3], GgmlType::F32, vec![9; 12]).unwrap();
        w.add_tensor("b", &[5], GgmlType::F16, vec![8; 10]).unwrap();
        let mut f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
        assert_eq!(f.alignment(), 256);
        assert_eq!(f.data_offset() % 256, 0);
        assert_eq!(f.tensor("b").unwrap().offset, 256);
        assert_eq!(f.tensor_data("b").unwrap(), vec![8; 10]);
    }

    #[test]
    fn version_2_reads_and_others_are_refused() {
        let mut w = GgufWriter::new();
        w.set_version(2);
        w.add_metadata("k", MetaValue::Bool(false));
        let bytes = w.to_bytes().unwrap();
        assert_eq!(GgufFile::from_bytes(bytes.clone()).unwrap().version(), 2);
        let mut v1 = bytes.clone();
        v1[4] = 1;
        assert!(matches!(
            GgufFile::from_bytes(v1),
            Err(GgufError::Version(1))
        ));
        let mut magic = bytes;
        magic[0] = b'X';
        assert!(matches!(
            GgufFile::from_bytes(magic),
            Err(GgufError::BadMagic(_))
        ));
    }

    /// Byte offset of the first occurrence of `needle`.
    fn find(hay: &[u8], needle: &[u8]) -> usize {
        hay.windows(needle.len()).position(|w| w == needle).unwrap()
    }

    #[test]
    fn corrupted_fields_get_typed_errors() {
        let good = sample();
        // The tokens array's count (u64 4) follows its item type (u32 8).
        let at = find(&good, b"tokenizer.ggml.tokens") + 21 + 4 + 4;
        let mut huge = good.clone();
        huge[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            GgufFile::from_bytes(huge),
            Err(GgufError::Length {
                count: u64::MAX,
                ..
            })
        ));
        let mut bad_bool = good.clone();
        let at = find(&good, b"bool") + 4 + 4;
        bad_bool[at] = 2;
        assert!(matches!(
            GgufFile::from_bytes(bad_bool),
            Err(GgufError::Bool { value: 2, .. })
        ));
        let mut bad_type = good.clone();
        let at = find(&good, b"u8") + 2;
        bad_type[at] = 13;
        assert!(matches!(
            GgufFile::from_bytes(bad_type),
            Err(GgufError::ValueType { id: 13, .. })
        ));
        // q6's 210 bytes end 14 bytes of padding before the end of the file.
        let mut past_end = good.clone();
        past_end.truncate(good.len() - 15);
        assert!(matches!(
            GgufFile::from_bytes(past_end),
            Err(GgufError::Tensor { .. })
        ));
        assert!(matches!(
            GgufFile::from_bytes(good[..10].to_vec()),
            Err(GgufError::Truncated { .. })
        ));
    }

    #[test]
    fn duplicates_and_misaligned_offsets_are_refused() {
        let mut w = GgufWriter::new();
        w.add_metadata("k", MetaValue::U8(1));
        w.add_metadata("k", MetaValue::U8(2));
        assert!(matches!(
            GgufFile::from_bytes(w.to_bytes().unwrap()),
            Err(GgufError::Duplicate {
                what: "metadata key",
                ..
            })
        ));
        let mut w = GgufWriter::new();
        w.add_tensor("t", &[8], GgmlType::F32, vec![0; 32]).unwrap();
        let mut bytes = w.to_bytes().unwrap();
        // The only tensor info ends with its offset (u64 0); make it 4.
        let at = find(&bytes, b"t\x01\x00\x00\x00") + 1 + 4 + 8 + 4;
        bytes[at] = 4;
        assert!(matches!(
            GgufFile::from_bytes(bytes),
            Err(GgufError::Tensor { .. })
        ));
    }

    #[test]
    fn every_truncation_and_many_byte_flips_fail_cleanly() {
        let good = sample();
        let f = GgufFile::from_bytes(good.clone()).unwrap();
        let last = f.tensors().last().unwrap();
        let data_end = (f.data_offset() + last.offset + last.byte_len().unwrap()) as usize;
        // Any cut before the last tensor's end fails; cutting only its padding still reads.
        for cut in 0..good.len() {
            let read = GgufFile::from_bytes(good[..cut].to_vec());
            assert_eq!(read.is_err(), cut < data_end, "cut {cut}");
        }
        // Every byte, three patterns: parses or fails with an error, never panics.
        for at in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bytes = good.clone();
                bytes[at] ^= flip;
                if let Ok(mut f) = GgufFile::from_bytes(bytes) {
                    let names: Vec<String> = f.tensors().iter().map(|t| t.name.clone()).collect();
                    for name in names {
                        let _ = f.tensor_data(&name);
                    }
                }
            }
        }
    }

    #[test]
    fn open_reads_tensors_from_disk() {
        let path = std::env::temp_dir().join(format!("kiln-gguf-{}.gguf", std::process::id()));
        let mut w = GgufWriter::new();
        w.add_tensor("x", &[2], GgmlType::F32, vec![5; 8]).unwrap();
        w.write(&path).unwrap();
        let mut f = GgufFile::open(&path).unwrap();
        assert_eq!(f.tensor_data("x").unwrap(), vec![5; 8]);
        drop(f);
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(GgufFile::open(&path), Err(GgufError::Io { .. })));
    }
}
