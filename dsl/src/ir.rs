//! The typed IR: what the checker produces from the AST and what code generation (and later the
//! CPU interpreter) consumes. Every name is resolved, every expression carries its type, compile-time
//! parameters are substituted, imports are merged, implicit literal typing is done, and multi-
//! dimensional shared-array indexing is flattened to element offsets. Nothing here needs the source
//! text except spans, which stay for diagnostics and for naming source lines at run time.

use crate::diag::Span;

/// Scalar element types.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    Bf16,
    F32,
    F64,
}

impl Scalar {
    pub const ALL: [Scalar; 13] = [
        Scalar::Bool,
        Scalar::I8,
        Scalar::I16,
        Scalar::I32,
        Scalar::I64,
        Scalar::U8,
        Scalar::U16,
        Scalar::U32,
        Scalar::U64,
        Scalar::F16,
        Scalar::Bf16,
        Scalar::F32,
        Scalar::F64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::F16 => "f16",
            Scalar::Bf16 => "bf16",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }

    pub fn from_name(name: &str) -> Option<Scalar> {
        Scalar::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Size in bytes in memory (bool is stored as one byte).
    pub fn size(self) -> u32 {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 | Scalar::F16 | Scalar::Bf16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::Bf16 | Scalar::F32 | Scalar::F64)
    }

    pub fn is_int(self) -> bool {
        !self.is_float() && self != Scalar::Bool
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64)
    }
}

/// Memory spaces a view can point into.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    Global,
    Shared,
}

/// Which operand of `mma.sync` a tensor-core fragment holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FragRole {
    /// The 16 x K row-major left operand.
    A,
    /// The K x 8 column-major right operand.
    B,
    /// The 16 x 8 accumulator (and result).
    Acc,
}

/// A warp's tensor-core fragment: each lane holds a fixed part of a matrix in 32-bit registers
/// (docs/LANGUAGE.md has the per-lane layouts). f16/bf16 operands go with an f32 accumulator
/// (`mma.m16n8k16`), i8 operands with an i32 accumulator (`mma.m16n8k32`), f32 operands (used
/// as tf32: the low 13 mantissa bits are ignored) with an f32 accumulator (`mma.m16n8k8`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frag {
    pub role: FragRole,
    pub elem: Scalar,
}

impl Frag {
    /// A fragment of `role` holding `elem`, if mma.sync has one.
    pub fn new(role: FragRole, elem: Scalar) -> Option<Frag> {
        let ok = match role {
            FragRole::A | FragRole::B => {
                matches!(elem, Scalar::F16 | Scalar::Bf16 | Scalar::I8 | Scalar::F32)
            }
            FragRole::Acc => matches!(elem, Scalar::F32 | Scalar::I32),
        };
        ok.then_some(Frag { role, elem })
    }

    /// The source name of the type constructor (`frag_a`).
    pub fn role_name(self) -> &'static str {
        match self.role {
            FragRole::A => "frag_a",
            FragRole::B => "frag_b",
            FragRole::Acc => "frag_acc",
        }
    }

    /// 32-bit registers per lane.
    pub fn regs(self) -> u8 {
        match self.role {
            FragRole::A | FragRole::Acc => 4,
            FragRole::B => 2,
        }
    }

    /// The type of one register: operands pack 2 (16-bit) or 4 (8-bit) elements into a
    /// vector (`f16x2`, `i8x4`); a tf32 operand or accumulator register is one element.
    pub fn reg_type(self) -> Type {
        match (self.role, self.elem.size()) {
            (FragRole::A | FragRole::B, size) if size < 4 => {
                Type::Vector(self.elem, (4 / size) as u8)
            }
            _ => Type::Scalar(self.elem),
        }
    }

    /// The accumulator `mma` adds operands of this element type into.
    pub fn acc_for(elem: Scalar) -> Scalar {
        match elem {
            Scalar::I8 => Scalar::I32,
            _ => Scalar::F32,
        }
    }

    /// The K of the mma shape this operand element type uses (m16n8k8, m16n8k16 or m16n8k32).
    pub fn k(elem: Scalar) -> u32 {
        16 * 2 / elem.size()
    }
}

/// Value types.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// No value (functions without a result, statements).
    Void,
    Scalar(Scalar),
    /// A short vector of 2, 3 or 4 lanes.
    Vector(Scalar, u8),
    /// A pointer into `space` whose elements are `elem` (a scalar or vector type).
    View {
        space: Space,
        elem: Box<Type>,
        mutable: bool,
    },
    /// A tensor-core fragment (registers only: never in memory).
    Frag(Frag),
    /// A local register array of scalars, vectors or fragments, `dims` outermost first,
    /// row-major. Only `var`/`let` locals have this type, and every index into one is a
    /// compile-time constant, so code generation can keep each element in registers.
    Array {
        elem: Box<Type>,
        dims: Vec<u32>,
    },
    /// A TMA tensor map of elements of this type: one of the kernel's maps
    /// ([`ExprKind::TensorMap`]) or a device function's parameter holding one. Only the map
    /// operands of `TmaLoad`, `TmaPrefetch` and `TmaStore` and call arguments have this type;
    /// code generation passes the map's address.
    TensorMap(Scalar),
}

impl Type {
    pub fn scalar(&self) -> Option<Scalar> {
        match self {
            Type::Scalar(s) => Some(*s),
            _ => None,
        }
    }

    /// Size in bytes of a value of this type in memory (views and tensor maps are 8-byte
    /// addresses).
    pub fn size(&self) -> u32 {
        match self {
            Type::Void => 0,
            Type::Scalar(s) => s.size(),
            Type::Vector(s, n) => s.size() * (*n as u32),
            Type::View { .. } => 8,
            Type::Frag(f) => 4 * u32::from(f.regs()),
            Type::Array { elem, dims } => elem.size() * dims.iter().product::<u32>(),
            Type::TensorMap(_) => 8,
        }
    }
}

/// The row-major position of the element at `index` in an array of `dims`.
pub fn flat_index(dims: &[u32], index: &[u32]) -> u32 {
    dims.iter().zip(index).fold(0, |acc, (d, i)| acc * d + i)
}

/// Index of a variable (parameter or local) in [`Function::vars`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct VarId(pub u32);

/// Index of a shared array in [`Function::shared`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedId(pub u32);

/// Index of a function in [`Module::functions`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct FuncId(pub u32);

/// A whole compilation: the kernels of the root file, specialized, and every device function they
/// can reach (from any imported file). Functions appear before their callers where possible; code
/// generation must not rely on it (recursion is rejected by the checker).
#[derive(Clone, Debug)]
pub struct Module {
    pub functions: Vec<Function>,
}

impl Module {
    /// Drops the kernels whose name `keep` rejects, renumbering calls (only device functions are
    /// called, so no call loses its callee). Device functions stay, also those only the dropped
    /// kernels reached: code generation makes them internal, and LLVM deletes the uncalled.
    pub fn retain_kernels(&mut self, keep: impl Fn(&str) -> bool) {
        let mut next = 0;
        let new_id: Vec<Option<u32>> = self
            .functions
            .iter()
            .map(|f| {
                let kept = !matches!(f.kind, FunctionKind::Kernel(_)) || keep(&f.name);
                kept.then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        let mut index = 0;
        self.functions.retain(|_| {
            index += 1;
            new_id[index - 1].is_some()
        });
        for f in &mut self.functions {
            for_each_expr_mut(&mut f.body, &mut |e| {
                if let ExprKind::Call(id, _) = &mut e.kind {
                    *id = FuncId(new_id[id.0 as usize].expect("a call of a kernel"));
                }
            });
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FunctionKind {
    Device,
    Kernel(Launch),
}

/// A kernel's launch configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Threads per block (x, y, z), compile-time constants; their product is the launch bound.
    pub block: [u32; 3],
    /// Blocks per cluster (x, y, z), compile-time constants; [1, 1, 1] without `cluster(...)`.
    /// The blocks of a cluster run at once and may reach each other's shared memory (sm_90).
    /// The grid's dimensions must be multiples of these.
    pub cluster: [u32; 3],
    /// Grid size (x, y, z) as expressions over the kernel's scalar parameters and constants, type
    /// u32. Only for the host, which evaluates them with the launch arguments (see [`Expr`]).
    pub grid: [Expr; 3],
    /// Compile-time parameters with the values this specialization used, in declaration order.
    pub specialization: Vec<(String, CtValue)>,
    /// The kernel's tensor maps (`let m = tensor_map(...)`), in declaration order: the host
    /// encodes each from its view's buffer and passes it by value after the parameters.
    pub tensor_maps: Vec<TensorMap>,
}

/// A TMA tensor map: `rows` x `cols` elements of the global view parameter `param`, rows dense,
/// copied into shared memory in boxes of `box_rows` x `box_cols` by `TmaLoad` (and written back
/// from boxes laid out the same way by `TmaStore`). A box whose rows are 32, 64 or 128 bytes
/// lands in the swizzle of that width (the layout of a `swizzle`d array of such rows; `Wgmma`
/// reads 128-byte ones); any other lands row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMap {
    pub name: String,
    pub param: VarId,
    pub elem: Scalar,
    /// Where the tensor starts in the parameter's buffer, in elements. This and the extents
    /// are over the kernel's scalar parameters and constants, as grid expressions are.
    pub offset: Expr,
    pub rows: Expr,
    pub cols: Expr,
    pub box_rows: u32,
    pub box_cols: u32,
    pub span: Span,
}

impl TensorMap {
    /// Bytes of one box: what a `TmaLoad` of this map completes on its mbarrier.
    pub fn box_bytes(&self) -> u32 {
        self.box_rows * self.box_cols * self.elem.size()
    }

    /// The hardware swizzle a box lands in, in bytes (0: none): a box with rows of 32, 64 or
    /// 128 bytes takes that swizzle, the layout of a `swizzle`d array of such rows.
    pub fn swizzle_bytes(&self) -> u32 {
        match self.box_cols * self.elem.size() {
            b @ (32 | 64 | 128) => b,
            _ => 0,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Function {
    /// The symbol name in the PTX (kernels keep their source name).
    pub name: String,
    pub kind: FunctionKind,
    /// The parameters, in order, as indices into `vars`.
    pub params: Vec<VarId>,
    pub ret: Type,
    /// Every variable: parameters first, then locals in order of declaration. Names need not be
    /// unique (shadowing); ids are.
    pub vars: Vec<Var>,
    /// Shared arrays declared in this kernel (empty for device functions).
    pub shared: Vec<SharedArray>,
    pub body: Block,
    pub span: Span,
    /// The file this function was defined in (as given to the compiler, for messages).
    pub file: String,
}

#[derive(Clone, Debug)]
pub struct Var {
    pub name: String,
    pub ty: Type,
    pub mutable: bool,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct SharedArray {
    pub name: String,
    pub elem: Type,
    /// Dimensions, outermost first (logical: what indices range over).
    pub dims: Vec<u64>,
    /// Where element `[..][r][c]` is stored; the checker has already applied it to every index
    /// (the IR holds physical offsets), this says how much storage the array takes.
    pub layout: TileLayout,
    pub span: Span,
}

/// The physical layout of a shared array's rows (its last two dimensions); the outer
/// dimensions are whole tiles, row-major.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TileLayout {
    /// Plain row-major.
    RowMajor,
    /// Row-major with this many unused elements after every row (row stride = columns + pad).
    Padded(u32),
    /// Rows of `row_chunks` 16-byte chunks (a power of two, at most 8); chunk `c` of row `r` is
    /// stored at chunk `c ^ (r / (8 / row_chunks) % row_chunks)` of the row.
    Swizzled { row_chunks: u32 },
}

impl std::fmt::Display for TileLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TileLayout::RowMajor => Ok(()),
            TileLayout::Padded(p) => write!(f, " pad({p})"),
            TileLayout::Swizzled { .. } => write!(f, " swizzle"),
        }
    }
}

impl SharedArray {
    /// Elements of storage, padding included.
    pub fn len(&self) -> u64 {
        let pad = match self.layout {
            TileLayout::Padded(p) => u64::from(p),
            _ => 0,
        };
        match self.dims.split_last() {
            Some((cols, outer)) if pad > 0 => outer.iter().product::<u64>() * (cols + pad),
            _ => self.dims.iter().product(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn bytes(&self) -> u64 {
        self.len() * self.elem.size() as u64
    }

    /// Byte alignment of the array's start. A swizzled array is aligned to its swizzle period
    /// (8 rows of 128 bytes for 8-chunk rows), so that its XOR pattern is the hardware's
    /// 128/64/32-byte swizzle on address bits, which `wgmma` operands read through. Other arrays
    /// of 128 bytes or more start at 128 bytes, as TMA copies (`TmaLoad`) into them need.
    pub fn align(&self) -> u64 {
        match self.layout {
            TileLayout::Swizzled { row_chunks } => 16 * 8 * u64::from(row_chunks),
            _ if self.bytes() >= 128 => 128,
            _ => 16,
        }
    }
}

pub type Block = Vec<Stmt>;

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum StmtKind {
    /// Defines `var` (declared in `Function::vars`) with an initial value.
    Let {
        var: VarId,
        init: Expr,
    },
    /// `var = value` (compound assignments are desugared to a plain assignment).
    Assign {
        var: VarId,
        value: Expr,
    },
    /// `var[index] = value` for a register array `var` ([`Type::Array`]); one constant index per
    /// dimension.
    SetElement {
        var: VarId,
        index: Vec<u32>,
        value: Expr,
    },
    /// `*ptr = value`; `ptr` has a mutable view type whose element type is `value`'s type.
    Store {
        ptr: Expr,
        value: Expr,
    },
    If {
        cond: Expr,
        then_body: Block,
        else_body: Block,
    },
    /// `for var in start..end step step`: var is defined by the loop; start, end and step have the
    /// variable's integer type; step > 0 is checked at compile time if constant. The loop runs while
    /// `var < end`, and `end` and `step` are evaluated once, before the first iteration.
    For {
        var: VarId,
        start: Expr,
        end: Expr,
        step: Expr,
        body: Block,
    },
    While {
        cond: Expr,
        body: Block,
    },
    Break,
    Continue,
    Return(Option<Expr>),
    /// An expression evaluated for its effect (a call, an atomic, an intrinsic).
    Expr(Expr),
    /// Block-wide barrier (`bar.sync 0`); every thread of the block must reach it.
    Barrier,
    /// Memory fence.
    Fence(FenceScope),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FenceScope {
    Block,
    Device,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Type,
    pub span: Span,
}

/// A compile-time constant. Integers hold their value sign- or zero-extended per the type.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstValue {
    Bool(bool),
    Int(i128),
    Float(f64),
}

impl Eq for ConstValue {}

/// A compile-time parameter's value in a specialization: a constant, or a scalar type for a type
/// parameter (`<OUT: type = f32>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CtValue {
    Const(ConstValue),
    Type(Scalar),
}

impl std::fmt::Display for CtValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CtValue::Const(v) => f.write_str(&crate::print::const_text(v)),
            CtValue::Type(s) => f.write_str(s.name()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExprKind {
    /// A constant of the expression's scalar type; of a vector, fragment or array type it fills
    /// every element (arrays only as a `Let`'s initializer).
    Const(ConstValue),
    /// Read a parameter or local (never a whole register array).
    Var(VarId),
    /// Read the element of register array `var` ([`Type::Array`]) at `index`, one constant per
    /// dimension.
    Element {
        var: VarId,
        index: Vec<u32>,
    },
    /// The view of a shared array's first element (type `View { space: Shared, mutable: true }`).
    SharedArray(SharedId),
    /// The running kernel's tensor map `.0` (an index into its `Launch::tensor_maps`), of type
    /// `TensorMap(elem)`: only in kernels, as `TmaLoad`'s map operand or a call argument.
    TensorMap(u32),
    Unary(UnOp, Box<Expr>),
    /// Both operands have the same type, except shifts (the amount has the same type too) and
    /// comparisons (result bool). Vector operands work lane-wise.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `a && b`, `a || b`: short-circuit.
    Logical(LogicalOp, Box<Expr>, Box<Expr>),
    /// Convert to the expression's type (scalars; vectors lane-wise).
    Cast(Box<Expr>),
    /// `cond ? a : b` with both sides evaluated (`select` built-in).
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// The view `base + index` elements further on (same view type as base). Index is any int.
    Offset {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    /// Read the element a view points at.
    Load(Box<Expr>),
    /// Build a vector from scalars (one per lane), or a fragment from its registers.
    VectorBuild(Vec<Expr>),
    /// Lane `.1` of a vector, or register `.1` of a fragment ([`Frag::reg_type`]).
    Extract(Box<Expr>, u8),
    /// Reinterpret the bits of a scalar or vector as the expression's type (same size).
    Bitcast(Box<Expr>),
    /// A special register or built-in value (u32).
    Special(Special),
    /// A built-in operation; see [`Builtin`] for the arguments.
    Builtin(Builtin, Vec<Expr>),
    /// Call a device function.
    Call(FuncId, Vec<Expr>),
    /// Call an LLVM intrinsic by name with the expression's type as result (Void allowed). The
    /// argument types are the overload; code generation declares it as written.
    Intrinsic {
        name: String,
        args: Vec<Expr>,
    },
    /// Inline PTX with LLVM constraints; result of the expression's type (Void allowed).
    InlineAsm {
        template: String,
        constraints: String,
        args: Vec<Expr>,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    /// Logical not on bool, bitwise not on integers.
    Not,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    Xor,
    Shl,
    /// Arithmetic for signed, logical for unsigned types.
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LogicalOp {
    And,
    Or,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Axis {
    X,
    Y,
    Z,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Special {
    ThreadIdx(Axis),
    BlockIdx(Axis),
    BlockDim(Axis),
    GridDim(Axis),
    /// `%laneid`.
    Lane,
    /// Linear thread index in the block / 32.
    Warp,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MathFn {
    Exp,
    Log,
    Exp2,
    Log2,
    Sqrt,
    Rsqrt,
    /// An approximate reciprocal (`rcp.approx.ftz`): a division's cost without its fix-ups.
    Rcp,
    Tanh,
    Sin,
    Cos,
    Abs,
    Floor,
    Ceil,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ShuffleMode {
    Xor,
    Down,
    Up,
    Idx,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum VoteMode {
    All,
    Any,
    Ballot,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    Add,
    Max,
    Min,
    And,
    Or,
    Xor,
    Exch,
}

/// What a `TmaStore` does with the box: write it (`tma_store`), or add it element by element
/// into what the global memory holds, each element's add atomic (`tma_store_add`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TmaStoreOp {
    Write,
    Add,
}

/// Built-in operations. Argument lists, by variant:
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `[x]`, float scalar (Abs: also signed ints); result of x's type.
    Math(MathFn),
    /// `[a, b]`, same numeric type.
    Max,
    Min,
    /// `[a, b, c]`, float: a * b + c with one rounding.
    Fma,
    /// `[value (32-bit scalar), lane operand (u32)]`, full warp, clamp/width 32; result value's type.
    Shuffle(ShuffleMode),
    /// `[predicate (bool)]`, full warp; All/Any give bool, Ballot gives u32.
    Vote(VoteMode),
    /// `[ptr (mutable view of a 32- or 64-bit scalar), value]`; result: the old value.
    Atomic(AtomicOp),
    /// `[ptr, expected, new]`; result: the old value.
    AtomicCas,
    /// `[a, b, acc]` fragments (A and B of one element type, the matching accumulator):
    /// `a * b + acc` by the whole warp; result: an accumulator fragment.
    Mma,
    /// `[row address (shared view of f16, bf16 or i8)]`: `ldmatrix.sync.aligned.m8n8` of `count`
    /// (1, 2 or 4) 8x8 matrices of 16-bit units, transposed if `trans`, by the whole warp; lane
    /// `8 i + r` gives the address of row `r` of matrix `i`. Result: x1 one register (`f16x2`,
    /// ...), x2 a B fragment, x4 an A fragment.
    Ldmatrix {
        count: u8,
        trans: bool,
    },
    /// `[dst (shared mut view), src (global view), valid (bool)]`: start an asynchronous copy of
    /// `bytes` (4, 8 or 16) bytes; when `valid` is false, `src` is not read and `dst` is filled
    /// with zeros. The result is visible to this thread after the `CpAsyncWait` that completes
    /// its group. Void.
    CpAsync {
        bytes: u8,
    },
    /// `[]`: close this thread's pending copies into a group. Void.
    CpAsyncCommit,
    /// `[]`: wait until at most `.0` of this thread's groups are still in flight. Void.
    CpAsyncWait(u8),
    /// `[a, b, selector]` u32: PTX `prmt.b32` (byte permute of the 8 bytes `b:a`).
    Prmt,
    /// `[a, b, c]` u32: PTX `lop3.b32` with the truth table `.0` (bit `4a + 2b + c` of the
    /// table gives the result bit; `0xF0`, `0xCC`, `0xAA` select a, b, c).
    Lop3(u8),
    /// `[a (u32), b (u32), c (i32)]`: PTX `dp4a.{s32,u32}.s32`, `c` plus the sum of the four
    /// products of byte i of `a` and byte i of `b`; `b`'s bytes are signed, `a`'s are unsigned
    /// when `unsigned_a`, else signed. Result i32 (the sum wraps).
    Dp4a {
        unsigned_a: bool,
    },
    /// `[a (frag_a<f16> or shared view of f16), b (shared view of f16)]`, by every thread of
    /// each warpgroup (128 threads): the asynchronous warpgroup MMA `wgmma.mma_async` m64nNk16
    /// with f32 accumulators, N = 8 `n`. A is 64 x 16: warp `w` of the group gives rows 16 w..
    /// 16 w + 15 as an mma A fragment, or A is a shared view laid out as B is (64 rows). B is
    /// N x 16 (K-major) in shared memory in the 128-byte swizzle: row r's 16 elements from byte
    /// `b + 128 r` on, each address XORed with ((address >> 7) % 8) << 4 (so `b` points into a
    /// 1024-byte aligned `swizzle`d array of 64-element rows). The accumulators are `n`
    /// consecutive `frag_acc<f32>` elements of register array `acc`, from flat index `first`:
    /// fragment j holds columns 8 j.. 8 j + 7 of the warp's 16 rows, laid out as mma's. Neither
    /// A nor the accumulators may be touched until a `WgmmaWait` covers the operation. Void;
    /// sm_90a only.
    Wgmma {
        acc: VarId,
        first: u32,
        n: u16,
    },
    /// `[]`: `wgmma.fence`: order this thread's register writes before the next `Wgmma` reads
    /// them. Void.
    WgmmaFence,
    /// `[]`: close this warpgroup's pending `Wgmma`s into a group. Void.
    WgmmaCommit,
    /// `[]`: wait until at most `.0` of the warpgroup's groups are in flight. Void.
    WgmmaWait(u8),
    /// `[]`: `setmaxnreg.inc` (`increase`) or `setmaxnreg.dec`: the warpgroup's registers per
    /// thread become `regs` (24 to 256, a multiple of 8), so that a producer warpgroup can hand
    /// its registers to the consumers of a block whose size would cap theirs. Void; sm_90a only.
    SetMaxNReg {
        increase: bool,
        regs: u16,
    },
    /// `[]`: `membar.gl` (`fence.sc.gpu`): this thread's memory accesses before it are ordered before
    /// those after it for every thread of the device. With a relaxed atomic after it, a release
    /// (a block publishing results through a flag); after one that observed a flag, an acquire.
    /// Void.
    FenceGpu,
    /// `[]`: `bar.warp.sync` of the whole warp: its lanes wait for each other, and their memory
    /// accesses before it are ordered before those after it (a lane that acquired a flag passes
    /// the acquire on to the others). Void.
    SyncWarp,
    /// `[ns (u32)]`: `nanosleep.u32`: the thread sleeps for about `ns` nanoseconds (the hardware
    /// picks a time between 0 and 2 ns, at most a millisecond), to back off from a spin or to
    /// start a block's work later than its neighbours'. Void.
    Nanosleep,
    /// `[]`: `fence.proxy.async.shared::cta`: this thread's earlier shared-memory writes (plain
    /// stores, cp.async) become visible to the async proxy, through which `Wgmma` reads B. Void;
    /// Hopper only, built for sm_90a with the wgmma kernels.
    FenceProxyAsync,
    /// `[]`: `fence.proxy.async.global`: this thread's global-memory accesses before it are
    /// ordered, across the generic and async proxies, before its accesses after it: a block that
    /// acquired a flag (`FenceGpu`) then adds into what another block's `TmaStore` wrote with its
    /// own `TmaStore`, or one whose stores completed (`TmaStoreDone`) then releases a flag. Void;
    /// sm_90a only.
    FenceProxyAsyncGlobal,
    /// `[bar (shared mut view of u64), count (u32)]`: `mbarrier.init` with `count` arrivals per
    /// phase, then the fence that makes the initialization visible to the async proxy (TMA).
    /// Void; sm_90a only, as the rest of this group.
    MbarrierInit,
    /// `[bar, bytes (u32)]`: `mbarrier.arrive.expect_tx`: one arrival, and `bytes` more
    /// transaction bytes the current phase waits for. Void.
    MbarrierExpectTx,
    /// `[bar]`: `mbarrier.arrive`: one arrival (a consumer releasing a ring slot to the
    /// thread that refills it). Void.
    MbarrierArrive,
    /// `[bar, parity (u32)]`: wait until the phase of parity `parity % 2` has completed. Void.
    MbarrierWait,
    /// `[dst (shared mut view), map (a tensor map of dst's elements), row (u32), col (u32),
    /// bar]`: `cp.async.bulk.tensor.2d`: copy the box of the map whose first element is (row,
    /// col) to `dst`, completing its bytes on `bar`. Elements past the tensor's edge read as
    /// zero. The map is the kernel's ([`ExprKind::TensorMap`]) or a device function's
    /// `TensorMap` parameter. Void.
    TmaLoad,
    /// `[dst, map, row, col, bar, ctas (u32)]`: `TmaLoad`'s box written into `dst` in every
    /// block of the cluster whose rank has its bit set in `ctas` (`.multicast::cluster`), its
    /// bytes completing on the mbarrier at `bar`'s address in each of them (bits past the
    /// cluster's blocks are ignored by the GPU; the interpreter reports them). Void.
    TmaLoadMulticast,
    /// `[]`: `%cluster_ctarank`: the block's rank in its cluster, 0 to blocks per cluster - 1
    /// (0 without `cluster(...)`). u32.
    ClusterRank,
    /// `[]`: `%clock64` (`.0` false), the SM's cycle counter, or `%globaltimer` (true), the
    /// device's nanosecond clock, which every SM reads alike: stamps for a kernel's own timeline
    /// (where its time goes between two points). u64; the interpreter gives its step count instead.
    Timer(bool),
    /// `[]`: `barrier.cluster.arrive` then `barrier.cluster.wait`: every thread of every block
    /// of the cluster arrives before any goes on, its memory accesses before visible (release,
    /// acquire) to the others' after. A block's threads must reach it before the block may
    /// take an arrival or a multicast copy from the others (their mbarriers initialized), and
    /// again before it exits while others may still reach its shared memory. Void.
    ClusterSync,
    /// `[bar, rank (u32)]`: `mbarrier.arrive.shared::cluster` on the mbarrier at `bar`'s
    /// address in the cluster's block `rank` (`mapa`): one arrival there (a consumer releasing a
    /// ring slot that another block's multicast copies refill). Its release is the default, at
    /// CTA scope: enough where what the thread did with the slot is complete before the arrival
    /// (reads whose values it holds, MMAs `wgmma_wait` retired), not for its plain stores to be
    /// seen by the other block; the interpreter orders them all. Void.
    MbarrierArriveCluster,
    /// `[map, row (u32), col (u32)]`: `cp.async.bulk.prefetch.tensor.2d.L2`: start bringing
    /// the box of the map whose first element is (row, col) into the L2, for a later
    /// `tma_load` (or any read) to find there. No effect on memory's contents, nothing to wait
    /// for. Void.
    TmaPrefetch,
    /// `[map (a tensor map), row (u32), col (u32), src (shared view of the map's elements)]`:
    /// `cp.async.bulk.tensor.2d.global.shared::cta.bulk_group` (or, adding, `cp.reduce.async.
    /// bulk.tensor.2d.global.shared::cta.add.tile.bulk_group`): write (add) the box of the map
    /// whose first element is (row, col) from `src`, laid out as `TmaLoad` lands that box, to
    /// (into) global memory; elements past the tensor's edges are not written. The TMA reads
    /// `src` through the async proxy until a `TmaStoreWait` covers the store's bulk group. Void.
    TmaStore(TmaStoreOp),
    /// `[]`: `cp.async.bulk.commit_group`: close this thread's pending `TmaStore`s into a bulk
    /// group. Void.
    TmaStoreCommit,
    /// `[]`: `cp.async.bulk.wait_group.read`: wait until at most `.0` of this thread's bulk
    /// groups may still be reading their shared sources. Void.
    TmaStoreWait(u8),
    /// `[]`: `cp.async.bulk.wait_group`: wait until at most `.0` of this thread's bulk groups
    /// are unfinished, the others' writes to global memory complete and visible to this thread
    /// (not only their reads of shared memory, as `TmaStoreWait`). Void.
    TmaStoreDone(u8),
}

/// Whether function `f` of module `m` uses an sm_90a-only instruction (`wgmma`, the async-proxy
/// fence, mbarriers, TMA or clusters' built-ins) or tensor maps or runs in clusters, itself or in
/// a device function it calls, so that it can be built only for sm_90a.
pub fn needs_sm90a(m: &Module, f: &Function) -> bool {
    if matches!(&f.kind, FunctionKind::Kernel(l) if !l.tensor_maps.is_empty() || l.cluster != [1, 1, 1])
    {
        return true;
    }
    uses_builtin(m, f, &|b| {
        matches!(
            b,
            Builtin::Wgmma { .. }
                | Builtin::WgmmaFence
                | Builtin::WgmmaCommit
                | Builtin::SetMaxNReg { .. }
                | Builtin::WgmmaWait(_)
                | Builtin::FenceProxyAsync
                | Builtin::FenceProxyAsyncGlobal
                | Builtin::MbarrierInit
                | Builtin::MbarrierExpectTx
                | Builtin::MbarrierArrive
                | Builtin::MbarrierWait
                | Builtin::TmaLoad
                | Builtin::TmaPrefetch
                | Builtin::TmaLoadMulticast
                | Builtin::ClusterRank
                | Builtin::ClusterSync
                | Builtin::MbarrierArriveCluster
                | Builtin::TmaStore(_)
                | Builtin::TmaStoreCommit
                | Builtin::TmaStoreWait(_)
                | Builtin::TmaStoreDone(_)
        )
    })
}

/// Whether function `f` of module `m` uses a builtin for which `wanted` holds, itself or in a
/// device function it calls.
pub fn uses_builtin(m: &Module, f: &Function, wanted: &dyn Fn(&Builtin) -> bool) -> bool {
    let mut found = false;
    let mut calls = Vec::new();
    let mut body = f.body.clone();
    for_each_expr_mut(&mut body, &mut |x| match &x.kind {
        ExprKind::Builtin(b, _) => found |= wanted(b),
        ExprKind::Call(id, _) => calls.push(*id),
        _ => {}
    });
    found
        || calls
            .iter()
            .any(|id| uses_builtin(m, &m.functions[id.0 as usize], wanted))
}

/// Whether evaluating `e` does more than compute a value (calls, warp operations, atomics,
/// copies), so that it cannot be evaluated twice.
pub fn has_effects(e: &Expr) -> bool {
    let mut found = false;
    expr(&mut e.clone(), &mut |x| {
        found |= match &x.kind {
            ExprKind::Call(..) | ExprKind::Intrinsic { .. } | ExprKind::InlineAsm { .. } => true,
            ExprKind::Builtin(b, _) => !matches!(
                b,
                Builtin::Math(_)
                    | Builtin::Max
                    | Builtin::Min
                    | Builtin::Fma
                    | Builtin::Prmt
                    | Builtin::Lop3(_)
                    | Builtin::Dp4a { .. }
            ),
            _ => false,
        }
    });
    found
}

/// Visits every expression of a block, outer before inner, for passes that rewrite the IR.
pub fn for_each_expr_mut(block: &mut Block, f: &mut dyn FnMut(&mut Expr)) {
    for stmt in block {
        match &mut stmt.kind {
            StmtKind::Let { init: e, .. }
            | StmtKind::Assign { value: e, .. }
            | StmtKind::Expr(e)
            | StmtKind::SetElement { value: e, .. }
            | StmtKind::Return(Some(e)) => expr(e, f),
            StmtKind::Store { ptr, value } => {
                expr(ptr, f);
                expr(value, f);
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                expr(cond, f);
                for_each_expr_mut(then_body, f);
                for_each_expr_mut(else_body, f);
            }
            StmtKind::For {
                start,
                end,
                step,
                body,
                ..
            } => {
                expr(start, f);
                expr(end, f);
                expr(step, f);
                for_each_expr_mut(body, f);
            }
            StmtKind::While { cond, body } => {
                expr(cond, f);
                for_each_expr_mut(body, f);
            }
            StmtKind::Break
            | StmtKind::Continue
            | StmtKind::Return(None)
            | StmtKind::Barrier
            | StmtKind::Fence(_) => {}
        }
    }
}

fn expr(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    f(e);
    match &mut e.kind {
        ExprKind::Const(_)
        | ExprKind::Var(_)
        | ExprKind::Element { .. }
        | ExprKind::SharedArray(_)
        | ExprKind::TensorMap(_)
        | ExprKind::Special(_) => {}
        ExprKind::Unary(_, x)
        | ExprKind::Cast(x)
        | ExprKind::Bitcast(x)
        | ExprKind::Load(x)
        | ExprKind::Extract(x, _) => expr(x, f),
        ExprKind::Binary(_, a, b) | ExprKind::Logical(_, a, b) => {
            expr(a, f);
            expr(b, f);
        }
        ExprKind::Offset { base, index } => {
            expr(base, f);
            expr(index, f);
        }
        ExprKind::Select(c, a, b) => {
            expr(c, f);
            expr(a, f);
            expr(b, f);
        }
        ExprKind::VectorBuild(args)
        | ExprKind::Builtin(_, args)
        | ExprKind::Call(_, args)
        | ExprKind::Intrinsic { args, .. }
        | ExprKind::InlineAsm { args, .. } => {
            for a in args {
                expr(a, f);
            }
        }
    }
}
