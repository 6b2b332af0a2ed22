//! Splitting a compiled module into one module per kernel, so that each kernel gets its own PTX
//! file holding just the device functions it reaches.

use std::collections::{HashMap, HashSet};
use zinc_dsl::ir::{Block, Expr, ExprKind, FuncId, FunctionKind, Module, StmtKind};

/// One module per kernel of `module`, in order, each with the kernel last and its callees before it.
pub fn per_kernel(module: &Module) -> Vec<Module> {
    module
        .functions
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f.kind, FunctionKind::Kernel(_)))
        .map(|(i, _)| extract(module, FuncId(i as u32)))
        .collect()
}

fn extract(module: &Module, root: FuncId) -> Module {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    visit(module, root, &mut seen, &mut order);
    let remap: HashMap<u32, u32> = order
        .iter()
        .enumerate()
        .map(|(new, old)| (*old, new as u32))
        .collect();
    let functions = order
        .iter()
        .map(|old| {
            let mut f = module.functions[*old as usize].clone();
            remap_block(&mut f.body, &remap);
            f
        })
        .collect();
    Module { functions }
}

/// Depth-first, callees first, so the order is a valid definition order.
fn visit(module: &Module, id: FuncId, seen: &mut HashSet<u32>, order: &mut Vec<u32>) {
    if !seen.insert(id.0) {
        return;
    }
    let mut callees = Vec::new();
    // The walk is mutable-only; a clone of the body is cheap next to code generation.
    let mut body = module.functions[id.0 as usize].body.clone();
    for_each_expr_in_block_mut(&mut body, &mut |e| {
        if let ExprKind::Call(callee, _) = &e.kind {
            callees.push(*callee);
        }
    });
    for callee in callees {
        visit(module, callee, seen, order);
    }
    order.push(id.0);
}

fn remap_block(block: &mut Block, remap: &HashMap<u32, u32>) {
    for_each_expr_in_block_mut(block, &mut |e| {
        if let ExprKind::Call(callee, _) = &mut e.kind {
            callee.0 = remap[&callee.0];
        }
    });
}

/// Visits every expression of a block, outermost first.
fn for_each_expr_in_block_mut(block: &mut Block, f: &mut dyn FnMut(&mut Expr)) {
    for stmt in block {
        match &mut stmt.kind {
            StmtKind::Let { init: e, .. }
            | StmtKind::Assign { value: e, .. }
            | StmtKind::SetElement { value: e, .. }
            | StmtKind::Return(Some(e))
            | StmtKind::Expr(e) => for_each_expr_mut(e, f),
            StmtKind::Store { ptr, value } => {
                for_each_expr_mut(ptr, f);
                for_each_expr_mut(value, f);
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                for_each_expr_mut(cond, f);
                for_each_expr_in_block_mut(then_body, f);
                for_each_expr_in_block_mut(else_body, f);
            }
            StmtKind::For {
                start,
                end,
                step,
                body,
                ..
            } => {
                for e in [start, end, step] {
                    for_each_expr_mut(e, f);
                }
                for_each_expr_in_block_mut(body, f);
            }
            StmtKind::While { cond, body } => {
                for_each_expr_mut(cond, f);
                for_each_expr_in_block_mut(body, f);
            }
            StmtKind::Return(None)
            | StmtKind::Break
            | StmtKind::Continue
            | StmtKind::Barrier
            | StmtKind::Fence(_) => {}
        }
    }
}

fn for_each_expr_mut(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    f(e);
    match &mut e.kind {
        ExprKind::Const(_)
        | ExprKind::Var(_)
        | ExprKind::Element { .. }
        | ExprKind::SharedArray(_)
        | ExprKind::Special(_) => {}
        ExprKind::Unary(_, a)
        | ExprKind::Cast(a)
        | ExprKind::Bitcast(a)
        | ExprKind::Load(a)
        | ExprKind::Extract(a, _) => for_each_expr_mut(a, f),
        ExprKind::Binary(_, a, b) | ExprKind::Logical(_, a, b) => {
            for_each_expr_mut(a, f);
            for_each_expr_mut(b, f);
        }
        ExprKind::Offset { base, index } => {
            for_each_expr_mut(base, f);
            for_each_expr_mut(index, f);
        }
        ExprKind::Select(c, a, b) => {
            for x in [c, a, b] {
                for_each_expr_mut(x, f);
            }
        }
        ExprKind::VectorBuild(args)
        | ExprKind::Builtin(_, args)
        | ExprKind::Call(_, args)
        | ExprKind::Intrinsic { args, .. }
        | ExprKind::InlineAsm { args, .. } => args.iter_mut().for_each(|a| for_each_expr_mut(a, f)),
    }
}
