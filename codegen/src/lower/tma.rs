//! Hopper's asynchronous copies: mbarriers and TMA tensor copies (`cp.async.bulk.tensor`), as
//! inline PTX (LLVM 22's intrinsics for them change shape between versions; the PTX does not).

use inkwell::types::{BasicMetadataTypeEnum, IntType};
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, PointerValue};
use inkwell::AddressSpace;
use zinc_dsl::diag::Span;
use zinc_dsl::ir::{Builtin, FunctionKind, TmaStoreOp};

use super::{internal, At, FnLowerer, Result};

impl<'ctx> FnLowerer<'_, 'ctx> {
    /// A shared-memory address as the 32-bit operand PTX's `.shared` instructions take.
    fn shared_u32(&self, p: BasicValueEnum<'ctx>, span: Span) -> Result<BasicValueEnum<'ctx>> {
        self.address_operand(p, self.ctx.i32_type(), span)
    }

    /// A tensor map's address (a generic pointer to the grid constant) as the 64-bit operand
    /// TMA instructions take.
    fn map_u64(&self, map: BasicValueEnum<'ctx>, span: Span) -> Result<BasicValueEnum<'ctx>> {
        self.address_operand(map, self.ctx.i64_type(), span)
    }

    fn address_operand(
        &self,
        p: BasicValueEnum<'ctx>,
        ty: IntType<'ctx>,
        span: Span,
    ) -> Result<BasicValueEnum<'ctx>> {
        Ok(self
            .b
            .build_ptr_to_int(p.into_pointer_value(), ty, "")
            .at(span)?
            .into())
    }

    /// An inline PTX statement without results that touches memory.
    fn asm_statement(
        &self,
        template: &str,
        constraints: &str,
        args: &[BasicValueEnum<'ctx>],
        span: Span,
    ) -> Result<()> {
        let params: Vec<BasicMetadataTypeEnum> = args.iter().map(|a| a.get_type().into()).collect();
        let fn_ty = self.ctx.void_type().fn_type(&params, false);
        let clobbers = match constraints {
            "" => "~{memory}".to_string(),
            _ => format!("{constraints},~{{memory}}"),
        };
        let asm = self.ctx.create_inline_asm(
            fn_ty,
            template.to_string(),
            clobbers,
            true,
            false,
            None,
            false,
        );
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|&a| a.into()).collect();
        self.b.build_indirect_call(fn_ty, asm, &args, "").at(span)?;
        Ok(())
    }

    /// The addresses of the kernel's tensor maps (its by-value parameters after its own; a grid
    /// constant's address, `cvta.param`, is what TMA takes), each taken once here, in the entry
    /// block, through an opaque move. Left to LLVM, the address is rematerialized beside each
    /// use; where the uses sit in branches of one thread, the copies meet in a phi that ptxas
    /// cannot prove uniform, and it moves the address to uniform registers lane by lane (R2UR)
    /// at every TMA copy.
    pub(super) fn tensor_map_addresses(&self, span: Span) -> Result<Vec<PointerValue<'ctx>>> {
        let maps = match &self.f.kind {
            FunctionKind::Kernel(launch) => launch.tensor_maps.len(),
            FunctionKind::Device => 0,
        };
        let i64_ty = self.ctx.i64_type();
        let move_ty = i64_ty.fn_type(&[i64_ty.into()], false);
        let opaque_move = self.ctx.create_inline_asm(
            move_ty,
            "mov.b64 $0, $1;".to_string(),
            "=l,l".to_string(),
            true,
            false,
            None,
            false,
        );
        (0..maps)
            .map(|map| {
                let index = (self.f.params.len() + map) as u32;
                let param = self
                    .llfn
                    .get_nth_param(index)
                    .ok_or_else(|| internal("tensor map parameter missing", span))?;
                let addr = self
                    .b
                    .build_ptr_to_int(param.into_pointer_value(), i64_ty, "")
                    .at(span)?;
                let moved = self
                    .b
                    .build_indirect_call(move_ty, opaque_move, &[addr.into()], "")
                    .at(span)?
                    .try_as_basic_value()
                    .basic()
                    .ok_or_else(|| internal("tensor map move has no value", span))?;
                let ptr_ty = self.ctx.ptr_type(AddressSpace::default());
                self.b
                    .build_int_to_ptr(moved.into_int_value(), ptr_ty, "")
                    .at(span)
            })
            .collect()
    }

    /// The kernel's tensor map `map` (tensor_map_addresses).
    pub(super) fn tensor_map(&self, map: u32, span: Span) -> Result<PointerValue<'ctx>> {
        self.maps
            .get(map as usize)
            .copied()
            .ok_or_else(|| internal("tensor map parameter missing", span))
    }

    /// `mbarrier_init`, `mbarrier_expect_tx`, `mbarrier_arrive`, `mbarrier_wait`, the TMA
    /// copies (`tma_load`, `tma_prefetch`, `tma_store`) and the bulk groups of stores.
    pub(super) fn async_copy_op(
        &self,
        op: Builtin,
        vals: &[BasicValueEnum<'ctx>],
        span: Span,
    ) -> Result<()> {
        match (op, vals) {
            (Builtin::MbarrierInit, [bar, count]) => self.asm_statement(
                "mbarrier.init.shared::cta.b64 [$0], $1;\n\tfence.mbarrier_init.release.cluster;",
                "r,r",
                &[self.shared_u32(*bar, span)?, *count],
                span,
            ),
            (Builtin::MbarrierExpectTx, [bar, bytes]) => self.asm_statement(
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
                "r,r",
                &[self.shared_u32(*bar, span)?, *bytes],
                span,
            ),
            (Builtin::MbarrierArrive, [bar]) => self.asm_statement(
                "mbarrier.arrive.shared::cta.b64 _, [$0];",
                "r",
                &[self.shared_u32(*bar, span)?],
                span,
            ),
            // The address of the peer's mbarrier (`mapa`), then the arrival with the default
            // release at CTA scope: a release at cluster scope is a fence that waits for the
            // thread's outstanding memory operations (measured: it doubled gemm_wg's time with
            // a cluster of two, docs/PERF.md session 33). The reads of a slot being released are
            // complete by then (their values are in registers, or `wgmma_wait` retired them).
            (Builtin::MbarrierArriveCluster, [bar, rank]) => self.asm_statement(
                "{\n\t.reg .b32 remote;\n\tmapa.shared::cluster.u32 remote, $0, $1;\n\tmbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}",
                "r,r",
                &[self.shared_u32(*bar, span)?, *rank],
                span,
            ),
            // try_wait suspends the thread for a while in hardware; the loop covers timeouts.
            (Builtin::MbarrierWait, [bar, parity]) => self.asm_statement(
                "{\n\t.reg .pred done;\n\tzinc_wait_${:uid}:\n\tmbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n\t@!done bra zinc_wait_${:uid};\n\t}",
                "r,r",
                &[self.shared_u32(*bar, span)?, *parity],
                span,
            ),
            // Coordinates go innermost first: the column, then the row.
            (Builtin::TmaLoad, [dst, map, row, col, bar]) => self.asm_statement(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];",
                "r,l,r,r,r",
                &[
                    self.shared_u32(*dst, span)?,
                    self.map_u64(*map, span)?,
                    *col,
                    *row,
                    self.shared_u32(*bar, span)?,
                ],
                span,
            ),
            // The mask is a 16-bit operand.
            (Builtin::TmaLoadMulticast, [dst, map, row, col, bar, ctas]) => {
                let ctas = self
                    .b
                    .build_int_truncate(ctas.into_int_value(), self.ctx.i16_type(), "")
                    .at(span)?;
                self.asm_statement(
                    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [$0], [$1, {$2, $3}], [$4], $5;",
                    "r,l,r,r,r,h",
                    &[
                        self.shared_u32(*dst, span)?,
                        self.map_u64(*map, span)?,
                        *col,
                        *row,
                        self.shared_u32(*bar, span)?,
                        ctas.into(),
                    ],
                    span,
                )
            }
            (Builtin::TmaPrefetch, [map, row, col]) => self.asm_statement(
                "cp.async.bulk.prefetch.tensor.2d.L2.global.tile [$0, {$1, $2}];",
                "l,r,r",
                &[self.map_u64(*map, span)?, *col, *row],
                span,
            ),
            (Builtin::TmaStore(op), [map, row, col, src]) => self.asm_statement(
                match op {
                    TmaStoreOp::Write => {
                        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];"
                    }
                    TmaStoreOp::Add => {
                        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [$0, {$1, $2}], [$3];"
                    }
                },
                "l,r,r,r",
                &[
                    self.map_u64(*map, span)?,
                    *col,
                    *row,
                    self.shared_u32(*src, span)?,
                ],
                span,
            ),
            (Builtin::TmaStoreCommit, []) => {
                self.asm_statement("cp.async.bulk.commit_group;", "", &[], span)
            }
            (Builtin::TmaStoreWait(groups), []) => self.asm_statement(
                &format!("cp.async.bulk.wait_group.read {groups};"),
                "",
                &[],
                span,
            ),
            (Builtin::TmaStoreDone(groups), []) => self.asm_statement(
                &format!("cp.async.bulk.wait_group {groups};"),
                "",
                &[],
                span,
            ),
            _ => Err(internal("malformed mbarrier or TMA operation", span)),
        }
    }
}
