//! Statements and structured control flow.

use inkwell::basic_block::BasicBlock;
use inkwell::values::{BasicValue, PointerValue};
use zinc_dsl::diag::Span;
use zinc_dsl::ir::{flat_index, BinOp, Block, Expr, FenceScope, Stmt, StmtKind, Type, VarId};

use super::ll::{self, Op, Scope};
use super::{internal, At, FnLowerer, Loop, Result};

impl<'a, 'ctx> FnLowerer<'a, 'ctx> {
    pub(super) fn block(&mut self, stmts: &Block) -> Result<()> {
        stmts.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        let span = s.span;
        match &s.kind {
            StmtKind::Let { var, init: value } | StmtKind::Assign { var, value } => {
                let v = self.value(value)?;
                self.b.build_store(self.vars[var.0 as usize], v).at(span)?;
            }
            StmtKind::SetElement { var, index, value } => {
                let v = self.value(value)?;
                let slot = self.element_slot(*var, index, span)?;
                self.b.build_store(slot, v).at(span)?;
            }
            StmtKind::Store { ptr, value } => self.store(ptr, value, span)?,
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let c = self.value(cond)?.into_int_value();
                let then_bb = self.append_block("then");
                let else_bb = (!else_body.is_empty()).then(|| self.append_block("else"));
                let merge = self.append_block("endif");
                self.b
                    .build_conditional_branch(c, then_bb, else_bb.unwrap_or(merge))
                    .at(span)?;
                self.body_then_jump(then_bb, then_body, merge, span)?;
                if let Some(else_bb) = else_bb {
                    self.body_then_jump(else_bb, else_body, merge, span)?;
                }
                self.b.position_at_end(merge);
            }
            StmtKind::While { cond, body } => {
                let head = self.append_block("while");
                let body_bb = self.append_block("do");
                let exit = self.append_block("endwhile");
                self.b.build_unconditional_branch(head).at(span)?;
                self.b.position_at_end(head);
                let c = self.value(cond)?.into_int_value();
                self.b.build_conditional_branch(c, body_bb, exit).at(span)?;
                self.loop_body(body_bb, body, head, exit, span)?;
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            } => self.for_loop(*var, start, end, step, body, span)?,
            StmtKind::Break | StmtKind::Continue => {
                let target = self
                    .loops
                    .last()
                    .map(|l| {
                        if matches!(s.kind, StmtKind::Break) {
                            l.exit
                        } else {
                            l.next
                        }
                    })
                    .ok_or_else(|| internal("`break` or `continue` outside a loop", span))?;
                self.b.build_unconditional_branch(target).at(span)?;
                self.continue_in_dead_block();
            }
            StmtKind::Return(value) => {
                let v = value.as_ref().map(|e| self.value(e)).transpose()?;
                self.b
                    .build_return(v.as_ref().map(|v| v as &dyn BasicValue))
                    .at(span)?;
                self.continue_in_dead_block();
            }
            StmtKind::Expr(e) => {
                self.expr(e)?;
            }
            StmtKind::Barrier => {
                // `bar.sync 0`; LLVM 22 replaced llvm.nvvm.barrier0 with this.
                let zero = self.ctx.i32_type().const_zero().into();
                self.call_intrinsic("llvm.nvvm.barrier.cta.sync.aligned.all", &[], &[zero], span)?;
            }
            StmtKind::Fence(scope) => {
                let scope = match scope {
                    FenceScope::Block => Scope::Block,
                    FenceScope::Device => Scope::Device,
                };
                ll::fence(&self.b, self.ctx, scope);
            }
        }
        Ok(())
    }

    /// The address of an element of register array `var` in its stack slot; the index is
    /// constant, so SROA turns the slot into one register per element.
    pub(super) fn element_slot(
        &self,
        var: VarId,
        index: &[u32],
        span: Span,
    ) -> Result<PointerValue<'ctx>> {
        let v = &self.f.vars[var.0 as usize];
        let Type::Array { dims, .. } = &v.ty else {
            return Err(internal(
                format!("`{}` indexed but not an array", v.name),
                span,
            ));
        };
        self.flat_slot(var, flat_index(dims, index), span)
    }

    /// The slot of register array `var`'s element at row-major position `flat`.
    pub(super) fn flat_slot(
        &self,
        var: VarId,
        flat: u32,
        span: Span,
    ) -> Result<PointerValue<'ctx>> {
        let v = &self.f.vars[var.0 as usize];
        let ty = self.value_type(&v.ty, span)?;
        let i32 = self.ctx.i32_type();
        let at = [i32.const_zero(), i32.const_int(u64::from(flat), false)];
        // SAFETY: the checker bounds every index by its dimension, so the element exists.
        unsafe {
            self.b
                .build_in_bounds_gep(ty, self.vars[var.0 as usize], &at, "")
                .at(span)
        }
    }

    /// Lowering after a terminator goes to a fresh block without predecessors.
    fn continue_in_dead_block(&mut self) {
        let dead = self.append_block("dead");
        self.b.position_at_end(dead);
    }

    fn body_then_jump(
        &mut self,
        bb: BasicBlock<'ctx>,
        body: &Block,
        next: BasicBlock<'ctx>,
        span: Span,
    ) -> Result<()> {
        self.b.position_at_end(bb);
        self.block(body)?;
        self.b.build_unconditional_branch(next).at(span)?;
        Ok(())
    }

    /// Lowers a loop body at `body_bb` that continues at `next`, then moves on to `exit`.
    fn loop_body(
        &mut self,
        body_bb: BasicBlock<'ctx>,
        body: &Block,
        next: BasicBlock<'ctx>,
        exit: BasicBlock<'ctx>,
        span: Span,
    ) -> Result<()> {
        self.loops.push(Loop { next, exit });
        let lowered = self.body_then_jump(body_bb, body, next, span);
        self.loops.pop();
        lowered?;
        self.b.position_at_end(exit);
        Ok(())
    }

    /// `for var in start..end step step`: end and step are evaluated once, before the loop.
    fn for_loop(
        &mut self,
        var: VarId,
        start: &Expr,
        end: &Expr,
        step: &Expr,
        body: &Block,
        span: Span,
    ) -> Result<()> {
        let s = self.scalar_of(&start.ty, span)?;
        let slot = self.vars[var.0 as usize];
        let ty = self.value_type(&start.ty, span)?;
        let first = self.value(start)?;
        self.b.build_store(slot, first).at(span)?;
        let end = self.value(end)?;
        let step = self.value(step)?;

        let head = self.append_block("for");
        let body_bb = self.append_block("for_body");
        let next = self.append_block("for_step");
        let exit = self.append_block("endfor");
        self.b.build_unconditional_branch(head).at(span)?;

        self.b.position_at_end(head);
        let i = self.b.build_load(ty, slot, "").at(span)?;
        let more = self.compare(BinOp::Lt, i, end, s).into_int_value();
        self.b
            .build_conditional_branch(more, body_bb, exit)
            .at(span)?;

        self.b.position_at_end(next);
        let i = self.b.build_load(ty, slot, "").at(span)?;
        let i = ll::binop(&self.b, Op::LLVMAdd, i, step);
        self.b.build_store(slot, i).at(span)?;
        self.b.build_unconditional_branch(head).at(span)?;

        self.loop_body(body_bb, body, next, exit, span)
    }
}
