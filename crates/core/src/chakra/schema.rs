//! The Chakra execution-trace messages (MLCommons Chakra,
//! `schema/protobuf/et_def.proto`), written here in our own words: the
//! field numbers and wire types are the interface, the Rust names are ours.
//! `prost` derives the encoding; nothing here parses bytes by hand.
//!
//! A trace file is a stream of messages, each preceded by its length as a
//! varint: one [`GlobalMetadata`], then [`Node`]s (`crate::chakra::io`).

/// The first message of a file: the schema version and free attributes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GlobalMetadata {
    /// Schema version, e.g. `1.0.0`.
    #[prost(string, tag = "1")]
    pub version: String,
    /// Free attributes.
    #[prost(message, repeated, tag = "2")]
    pub attr: Vec<Attribute>,
}

/// One operation of a rank's trace.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Node {
    /// Unique within the file.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Shown on the timeline.
    #[prost(string, tag = "2")]
    pub name: String,
    /// A [`NodeType`] value (unknown values are kept, and skipped later).
    #[prost(enumeration = "NodeType", tag = "3")]
    pub kind: i32,
    /// Nodes that must end before this one starts (ordering only).
    #[prost(uint64, repeated, tag = "4")]
    pub ctrl_deps: Vec<u64>,
    /// Nodes whose outputs this one reads.
    #[prost(uint64, repeated, tag = "5")]
    pub data_deps: Vec<u64>,
    /// When it started on the traced system.
    #[prost(uint64, tag = "6")]
    pub start_time_micros: u64,
    /// How long it ran on the traced system.
    #[prost(uint64, tag = "7")]
    pub duration_micros: u64,
    /// Input values, shapes and types as text.
    #[prost(message, optional, tag = "8")]
    pub inputs: Option<IoInfo>,
    /// Output values, shapes and types as text.
    #[prost(message, optional, tag = "9")]
    pub outputs: Option<IoInfo>,
    /// Named attributes (`num_ops`, `comm_type`, `comm_size`, ...).
    #[prost(message, repeated, tag = "10")]
    pub attr: Vec<Attribute>,
}

/// A node's inputs or outputs, as the tracer printed them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IoInfo {
    /// Values.
    #[prost(string, tag = "1")]
    pub values: String,
    /// Shapes.
    #[prost(string, tag = "2")]
    pub shapes: String,
    /// Types.
    #[prost(string, tag = "3")]
    pub types: String,
}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum NodeType {
    /// Not set.
    Invalid = 0,
    /// Metadata only.
    Metadata = 1,
    /// A load from memory.
    MemLoad = 2,
    /// A store to memory.
    MemStore = 3,
    /// Computation.
    Comp = 4,
    /// A point-to-point send.
    CommSend = 5,
    /// A point-to-point receive.
    CommRecv = 6,
    /// A collective.
    CommColl = 7,
}

/// The collective of a `COMM_COLL_NODE` (its `comm_type` attribute).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum CommType {
    /// Every rank ends with the reduction of all.
    AllReduce = 0,
    /// The root ends with the reduction of all.
    Reduce = 1,
    /// Every rank ends with every rank's block.
    AllGather = 2,
    /// The root ends with every rank's block.
    Gather = 3,
    /// Every rank gets its block of the root's.
    Scatter = 4,
    /// Every rank gets the root's.
    Broadcast = 5,
    /// Block `j` of rank `i` goes to rank `j`.
    AllToAll = 6,
    /// Every rank ends with its block of the reduction.
    ReduceScatter = 7,
    /// Reduce-scatter with equal blocks.
    ReduceScatterBlock = 8,
    /// A rendezvous.
    Barrier = 9,
}

/// A named value of a node or of the metadata.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Attribute {
    /// Its name (`num_ops`, `comm_size`, ...).
    #[prost(string, tag = "1")]
    pub name: String,
    /// Documentation.
    #[prost(string, tag = "2")]
    pub doc_string: String,
    /// The value, of one of the schema's kinds.
    #[prost(
        oneof = "Value",
        tags = "3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, \
                25, 26, 27, 28, 29, 30, 31, 32"
    )]
    pub value: Option<Value>,
}

/// The value kinds of an [`Attribute`] (the schema's `oneof value`).
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    /// `double`.
    #[prost(double, tag = "3")]
    Double(f64),
    /// list of `double`.
    #[prost(message, tag = "4")]
    Doubles(Doubles),
    /// `float`.
    #[prost(float, tag = "5")]
    Float(f32),
    /// list of `float`.
    #[prost(message, tag = "6")]
    Floats(Floats),
    /// `int32`.
    #[prost(int32, tag = "7")]
    Int32(i32),
    /// list of `int32`.
    #[prost(message, tag = "8")]
    Int32s(Int32s),
    /// `int64`.
    #[prost(int64, tag = "9")]
    Int64(i64),
    /// list of `int64`.
    #[prost(message, tag = "10")]
    Int64s(Int64s),
    /// `uint32`.
    #[prost(uint32, tag = "11")]
    Uint32(u32),
    /// list of `uint32`.
    #[prost(message, tag = "12")]
    Uint32s(Uint32s),
    /// `uint64`.
    #[prost(uint64, tag = "13")]
    Uint64(u64),
    /// list of `uint64`.
    #[prost(message, tag = "14")]
    Uint64s(Uint64s),
    /// `sint32` (zig-zag).
    #[prost(sint32, tag = "15")]
    Sint32(i32),
    /// list of `sint32`.
    #[prost(message, tag = "16")]
    Sint32s(Sint32s),
    /// `sint64` (zig-zag).
    #[prost(sint64, tag = "17")]
    Sint64(i64),
    /// list of `sint64`.
    #[prost(message, tag = "18")]
    Sint64s(Sint64s),
    /// `fixed32`.
    #[prost(fixed32, tag = "19")]
    Fixed32(u32),
    /// list of `fixed32`.
    #[prost(message, tag = "20")]
    Fixed32s(Fixed32s),
    /// `fixed64`.
    #[prost(fixed64, tag = "21")]
    Fixed64(u64),
    /// list of `fixed64`.
    #[prost(message, tag = "22")]
    Fixed64s(Fixed64s),
    /// `sfixed32`.
    #[prost(sfixed32, tag = "23")]
    Sfixed32(i32),
    /// list of `sfixed32`.
    #[prost(message, tag = "24")]
    Sfixed32s(Sfixed32s),
    /// `sfixed64`.
    #[prost(sfixed64, tag = "25")]
    Sfixed64(i64),
    /// list of `sfixed64`.
    #[prost(message, tag = "26")]
    Sfixed64s(Sfixed64s),
    /// `bool`.
    #[prost(bool, tag = "27")]
    Bool(bool),
    /// list of `bool`.
    #[prost(message, tag = "28")]
    Bools(Bools),
    /// `string`.
    #[prost(string, tag = "29")]
    Str(String),
    /// list of `string`.
    #[prost(message, tag = "30")]
    Strs(Strs),
    /// `bytes`.
    #[prost(bytes = "vec", tag = "31")]
    Bytes(Vec<u8>),
    /// list of `bytes`.
    #[prost(message, tag = "32")]
    BytesList(BytesList),
}

macro_rules! list {
    ($(#[$doc:meta] $name:ident: $kind:ident $ty:ty;)*) => {$(
        #[$doc]
        #[derive(Clone, PartialEq, prost::Message)]
        pub struct $name {
            /// The values.
            #[prost($kind, repeated, tag = "1")]
            pub values: Vec<$ty>,
        }
    )*};
}

list! {
    /// A list of `double`.
    Doubles: double f64;
    /// A list of `float`.
    Floats: float f32;
    /// A list of `int32`.
    Int32s: int32 i32;
    /// A list of `int64`.
    Int64s: int64 i64;
    /// A list of `uint32`.
    Uint32s: uint32 u32;
    /// A list of `uint64`.
    Uint64s: uint64 u64;
    /// A list of `sint32`.
    Sint32s: sint32 i32;
    /// A list of `sint64`.
    Sint64s: sint64 i64;
    /// A list of `fixed32`.
    Fixed32s: fixed32 u32;
    /// A list of `fixed64`.
    Fixed64s: fixed64 u64;
    /// A list of `sfixed32`.
    Sfixed32s: sfixed32 i32;
    /// A list of `sfixed64`.
    Sfixed64s: sfixed64 i64;
    /// A list of `bool`.
    Bools: bool bool;
    /// A list of `string`.
    Strs: string String;
}

/// A list of `bytes`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesList {
    /// The values.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub values: Vec<Vec<u8>>,
}

impl Node {
    /// Node `id` named `name`, of `kind`, reading the outputs of
    /// `data_deps`, with `attr`; every other field empty.
    pub fn new(
        (id, name): (u64, &str),
        kind: NodeType,
        data_deps: Vec<u64>,
        attr: Vec<Attribute>,
    ) -> Node {
        Node {
            id,
            name: name.to_owned(),
            kind: kind as i32,
            data_deps,
            attr,
            ..Node::default()
        }
    }
}

impl Value {
    /// The value as an integer, whatever integer kind it was written as
    /// (the feeders of ASTRA-sim read `int64`, `uint64` or `int32`
    /// depending on the attribute; writers differ). `None` for other kinds
    /// and for negative values.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Int32(v) | Value::Sint32(v) | Value::Sfixed32(v) => u64::try_from(v).ok(),
            Value::Int64(v) | Value::Sint64(v) | Value::Sfixed64(v) => u64::try_from(v).ok(),
            Value::Uint32(v) | Value::Fixed32(v) => Some(u64::from(v)),
            Value::Uint64(v) | Value::Fixed64(v) => Some(v),
            _ => None,
        }
    }
}

impl Attribute {
    /// An `int64` attribute (how Chakra's writers store `num_ops`,
    /// `comm_type` and `comm_size`).
    pub fn int64(name: &str, value: i64) -> Attribute {
        Attribute::with(name, Value::Int64(value))
    }

    /// A `uint64` attribute (`tensor_size`).
    pub fn uint64(name: &str, value: u64) -> Attribute {
        Attribute::with(name, Value::Uint64(value))
    }

    /// An `int32` attribute (`comm_src`, `comm_dst`, `comm_tag`).
    pub fn int32(name: &str, value: i32) -> Attribute {
        Attribute::with(name, Value::Int32(value))
    }

    /// A `bool` attribute (`is_cpu_op`).
    pub fn boolean(name: &str, value: bool) -> Attribute {
        Attribute::with(name, Value::Bool(value))
    }

    /// A `string` attribute (`pg_name`).
    pub fn string(name: &str, value: &str) -> Attribute {
        Attribute::with(name, Value::Str(value.to_owned()))
    }

    fn with(name: &str, value: Value) -> Attribute {
        Attribute {
            name: name.to_owned(),
            doc_string: String::new(),
            value: Some(value),
        }
    }
}
