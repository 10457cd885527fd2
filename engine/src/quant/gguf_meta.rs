//! GGUF metadata values: the value types by id, and the values with typed accessors.

/// A metadata value type, by its GGUF id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    /// u8.
    U8 = 0,
    /// i8.
    I8 = 1,
    /// u16.
    U16 = 2,
    /// i16.
    I16 = 3,
    /// u32.
    U32 = 4,
    /// i32.
    I32 = 5,
    /// f32.
    F32 = 6,
    /// A byte, 0 or 1.
    Bool = 7,
    /// A u64 length then UTF-8 bytes.
    String = 8,
    /// An item type, a u64 count, then the items.
    Array = 9,
    /// u64.
    U64 = 10,
    /// i64.
    I64 = 11,
    /// f64.
    F64 = 12,
}

impl ValueType {
    /// The type a GGUF id names, `None` outside the spec.
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        [
            U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64,
        ]
        .get(id as usize)
        .copied()
    }

    /// The GGUF id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The fewest bytes one value of this type takes in a file.
    pub(crate) fn min_bytes(self) -> u64 {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::String => 8,
            ValueType::Array => 12,
        }
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// A u8.
    U8(u8),
    /// An i8.
    I8(i8),
    /// A u16.
    U16(u16),
    /// An i16.
    I16(i16),
    /// A u32.
    U32(u32),
    /// An i32.
    I32(i32),
    /// An f32.
    F32(f32),
    /// A bool.
    Bool(bool),
    /// A UTF-8 string.
    String(String),
    /// An array whose items all have one type (arrays of arrays nest).
    Array {
        /// The items' type.
        item_type: ValueType,
        /// The items.
        items: Vec<MetaValue>,
    },
    /// A u64.
    U64(u64),
    /// An i64.
    I64(i64),
    /// An f64.
    F64(f64),
}

impl MetaValue {
    /// The value's GGUF type.
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::String(_) => ValueType::String,
            MetaValue::Array { .. } => ValueType::Array,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F64(_) => ValueType::F64,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// Any integer that is non-negative, as u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer that fits i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetaValue::I8(v) => Some(v.into()),
            MetaValue::I16(v) => Some(v.into()),
            MetaValue::I32(v) => Some(v.into()),
            MetaValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// An f32 or f64, as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The bool, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array { items, .. } => Some(items),
            _ => None,
        }
    }

    /// The strings, if this is an array of strings (a tokenizer's vocabulary or merges).
    pub fn as_strings(&self) -> Option<Vec<&str>> {
        self.as_array()?.iter().map(MetaValue::as_str).collect()
    }
}

/// Alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
