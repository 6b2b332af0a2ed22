//! Assembling the module: rejecting recursion, keeping the device functions the kernels reach,
//! ordering callees before callers and renumbering calls.

use super::{Checked, Checker};
use crate::diag::Diagnostic;
use crate::ir::{self, ExprKind, FuncId};

#[derive(Copy, Clone, PartialEq, Eq)]
enum Mark {
    New,
    Open,
    Done,
}

/// Report every call that closes a cycle among the device functions.
pub fn check_recursion(ck: &mut Checker<'_>, device: &[Option<Checked>]) {
    let mut marks = vec![Mark::New; device.len()];
    let mut stack = Vec::new();
    for i in 0..device.len() {
        if marks[i] == Mark::New {
            visit(ck, device, i, &mut marks, &mut stack);
        }
    }
}

fn visit(
    ck: &mut Checker<'_>,
    device: &[Option<Checked>],
    i: usize,
    marks: &mut [Mark],
    stack: &mut Vec<usize>,
) {
    marks[i] = Mark::Open;
    stack.push(i);
    let calls = device[i].as_ref().map_or(&[][..], |c| &c.calls[..]);
    for &(j, span) in calls {
        match marks[j] {
            Mark::New => visit(ck, device, j, marks, stack),
            Mark::Open => {
                let start = stack.iter().position(|&f| f == j).unwrap_or(0);
                let chain: Vec<&str> = stack[start..]
                    .iter()
                    .chain([&j])
                    .map(|&f| ck.fns[f].item.name.name.as_str())
                    .collect();
                let d = Diagnostic::error(
                    format!("recursion is not supported: {}", chain.join(" -> ")),
                    span,
                );
                ck.error(d);
            }
            Mark::Done => {}
        }
    }
    stack.pop();
    marks[i] = Mark::Done;
}

/// The module: each kernel of the root file preceded by the device functions it reaches that
/// no earlier kernel reached, callees first.
pub fn assemble(device: Vec<Checked>, kernels: Vec<Checked>) -> ir::Module {
    let mut new_id: Vec<Option<u32>> = vec![None; device.len()];
    let mut order: Vec<Slot> = Vec::new();
    for (k, kernel) in kernels.iter().enumerate() {
        for &(callee, _) in &kernel.calls {
            place(&device, callee, &mut new_id, &mut order);
        }
        order.push(Slot::Kernel(k));
    }
    let mut device: Vec<Option<Checked>> = device.into_iter().map(Some).collect();
    let mut kernels: Vec<Option<Checked>> = kernels.into_iter().map(Some).collect();
    let functions = order
        .into_iter()
        .filter_map(|slot| {
            let checked = match slot {
                Slot::Device(d) => device[d].take(),
                Slot::Kernel(k) => kernels[k].take(),
            };
            let mut f = checked?.function;
            ir::for_each_expr_mut(&mut f.body, &mut |e| {
                if let ExprKind::Call(id, _) = &mut e.kind {
                    if let Some(Some(new)) = new_id.get(id.0 as usize) {
                        *id = FuncId(*new);
                    }
                }
            });
            Some(f)
        })
        .collect();
    ir::Module { functions }
}

/// A function of the module, by its index among the checked device functions or kernels.
enum Slot {
    Device(usize),
    Kernel(usize),
}

/// Post-order placement of device function `i` (the call graph is acyclic here).
fn place(device: &[Checked], i: usize, new_id: &mut [Option<u32>], order: &mut Vec<Slot>) {
    if new_id[i].is_some() {
        return;
    }
    // Claim the slot first so that a repeated callee is not placed twice.
    new_id[i] = Some(u32::MAX);
    for &(callee, _) in &device[i].calls {
        place(device, callee, new_id, order);
    }
    new_id[i] = Some(order.len() as u32);
    order.push(Slot::Device(i));
}
