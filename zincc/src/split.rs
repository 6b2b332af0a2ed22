//! Splitting a compiled module into one module per kernel, so that each kernel gets its own PTX
//! file holding just the device functions it reaches.

use std::collections::{HashMap, HashSet};
use zinc_dsl::ir::{for_each_expr_mut, Block, ExprKind, FuncId, FunctionKind, Module};

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
    for_each_expr_mut(&mut body, &mut |e| {
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
    for_each_expr_mut(block, &mut |e| {
        if let ExprKind::Call(callee, _) = &mut e.kind {
            callee.0 = remap[&callee.0];
        }
    });
}
