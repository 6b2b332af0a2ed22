//! Name resolution, type checking, constant evaluation and specialization: syntax trees of all
//! loaded files in, one typed [`ir::Module`] out.

mod body;
mod builtins;
mod expr;
mod kernel;
mod module;
mod suggest;
mod types;

use std::collections::HashMap;

use crate::ast::{self, Item};
use crate::consteval;
use crate::diag::{Diagnostic, Span};
use crate::ir::{self, ConstValue, Scalar, Type};
use crate::loader::Loaded;

use body::{Context, FnCx};

/// Marks that an error was reported already; the caller just stops what it was doing.
#[derive(Debug)]
pub struct Reported;

pub type Res<T> = Result<T, Reported>;

/// A top-level item as the global namespace knows it.
#[derive(Copy, Clone, Debug)]
enum ItemRef {
    Const(usize),
    Fn(usize),
    Kernel { file: u32 },
}

enum ConstState {
    Todo,
    /// Being evaluated: meeting it again means the constant depends on itself.
    Busy,
    Done(Scalar, ConstValue),
    Failed,
}

struct ConstSlot<'a> {
    file: u32,
    item: &'a ast::ConstItem,
    state: ConstState,
}

/// A device function's resolved signature.
#[derive(Clone, Debug)]
struct FnSig {
    params: Vec<(String, Type, Span)>,
    ret: Type,
}

struct FnSlot<'a> {
    file: u32,
    item: &'a ast::FnItem,
    /// None when a parameter or result type did not resolve (already reported).
    sig: Option<FnSig>,
}

/// A checked function with the device functions it calls (by index into `Checker::fns`).
struct Checked {
    function: ir::Function,
    calls: Vec<(usize, Span)>,
}

pub(crate) struct Checker<'a> {
    loaded: &'a Loaded,
    items: HashMap<&'a str, (ItemRef, Span)>,
    consts: Vec<ConstSlot<'a>>,
    fns: Vec<FnSlot<'a>>,
    /// The type parameters (`<OUT: type = f32>`) of the kernel being checked, as written types
    /// name them.
    type_params: Vec<(String, Scalar)>,
    diags: Vec<Diagnostic>,
}

/// The result of looking a name up among the items a file can see.
enum Lookup {
    Found(ItemRef),
    /// Defined in a file that this file does not import.
    NotImported(u32),
    Missing,
}

pub fn check(loaded: &Loaded, defines: &[(String, String)]) -> Result<ir::Module, Vec<Diagnostic>> {
    let mut ck = Checker {
        loaded,
        items: HashMap::new(),
        consts: Vec::new(),
        fns: Vec::new(),
        type_params: Vec::new(),
        diags: Vec::new(),
    };
    ck.collect_items();
    kernel::check_defines(&mut ck, defines);
    for i in 0..ck.fns.len() {
        ck.fns[i].sig = ck.signature(i);
    }
    for i in 0..ck.consts.len() {
        let _ = ck.const_value(i);
    }
    let device: Vec<Option<Checked>> = (0..ck.fns.len()).map(|i| ck.device_fn(i)).collect();
    let mut kernels: Vec<Option<Checked>> = kernel::root_kernels(&ck)
        .map(|k| kernel::check_kernel(&mut ck, 0, k, &k.name.name, defines))
        .collect();
    for instance in kernel::root_instances(&ck) {
        kernels.push(kernel::check_instance(&mut ck, instance, defines));
    }
    module::check_recursion(&mut ck, &device);
    if !ck.diags.is_empty() {
        return Err(ck.diags);
    }
    // With no error reported, every function checked.
    let device: Vec<Checked> = device.into_iter().flatten().collect();
    let kernels: Vec<Checked> = kernels.into_iter().flatten().collect();
    Ok(module::assemble(device, kernels))
}

impl<'a> Checker<'a> {
    fn error(&mut self, d: Diagnostic) -> Reported {
        self.diags.push(d);
        Reported
    }

    /// The scalar type that type parameter `name` of the kernel being checked stands for.
    fn type_param(&self, name: &str) -> Option<Scalar> {
        self.type_params
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, s)| s)
    }

    fn file_name(&self, file: u32) -> &'a str {
        &self.loaded.sources.files[file as usize].name
    }

    fn collect_items(&mut self) {
        let loaded = self.loaded;
        for (file, ast) in loaded.files.iter().enumerate() {
            let file = file as u32;
            for item in &ast.items {
                let (name, r) = match item {
                    Item::Import(_) => continue,
                    Item::Const(c) => {
                        self.consts.push(ConstSlot {
                            file,
                            item: c,
                            state: ConstState::Todo,
                        });
                        (&c.name, ItemRef::Const(self.consts.len() - 1))
                    }
                    Item::Fn(f) => {
                        self.fns.push(FnSlot {
                            file,
                            item: f,
                            sig: None,
                        });
                        (&f.name, ItemRef::Fn(self.fns.len() - 1))
                    }
                    Item::Kernel(k) => (&k.name, ItemRef::Kernel { file }),
                    Item::KernelInstance(k) => (&k.name, ItemRef::Kernel { file }),
                };
                if builtins::is_reserved(&name.name) {
                    self.error(Diagnostic::error(
                        format!(
                            "`{}` is the name of a built-in and cannot be redefined",
                            name.name
                        ),
                        name.span,
                    ));
                } else if let Some((_, first)) = self.items.get(name.name.as_str()) {
                    let first = *first;
                    self.error(
                        Diagnostic::error(
                            format!("`{}` is defined more than once", name.name),
                            name.span,
                        )
                        .with_note("first defined here", Some(first)),
                    );
                } else {
                    self.items.insert(&name.name, (r, name.span));
                }
            }
        }
    }

    fn item_file(&self, r: ItemRef) -> u32 {
        match r {
            ItemRef::Const(i) => self.consts[i].file,
            ItemRef::Fn(i) => self.fns[i].file,
            ItemRef::Kernel { file } => file,
        }
    }

    /// Items visible in `file`: its own and those of the files it imports.
    fn lookup(&self, file: u32, name: &str) -> Lookup {
        let Some(&(r, _)) = self.items.get(name) else {
            return Lookup::Missing;
        };
        let def = self.item_file(r);
        if def == file || self.loaded.imports[file as usize].contains(&def) {
            Lookup::Found(r)
        } else {
            Lookup::NotImported(def)
        }
    }

    /// Names of the items `file` can see, for "did you mean" suggestions.
    fn visible_names(&self, file: u32, fns: bool) -> Vec<&'a str> {
        let mut names: Vec<&'a str> = self
            .items
            .iter()
            .filter(|(_, (r, _))| matches!(r, ItemRef::Fn(_)) == fns)
            .filter(|(name, _)| matches!(self.lookup(file, name), Lookup::Found(_)))
            .map(|(name, _)| *name)
            .collect();
        names.sort_unstable();
        names
    }

    fn signature(&mut self, i: usize) -> Option<FnSig> {
        let item = self.fns[i].item;
        let mut params = Vec::new();
        let mut ok = true;
        for p in &item.params {
            match types::resolve(self, &p.ty, types::Usage::FnParam) {
                Ok(ty) => params.push((p.name.name.clone(), ty, p.name.span)),
                Err(Reported) => ok = false,
            }
        }
        let ret = match &item.ret {
            Some(t) => types::resolve(self, t, types::Usage::FnResult).ok(),
            None => Some(Type::Void),
        };
        Some(FnSig { params, ret: ret? }).filter(|_| ok)
    }

    /// The value of constant item `i`, evaluating it on first use.
    fn const_value(&mut self, i: usize) -> Res<(Scalar, ConstValue)> {
        match &self.consts[i].state {
            ConstState::Done(s, v) => return Ok((*s, v.clone())),
            ConstState::Failed => return Err(Reported),
            ConstState::Busy => {
                let name = &self.consts[i].item.name;
                let d = Diagnostic::error(
                    format!("constant `{}` depends on itself", name.name),
                    name.span,
                );
                return Err(self.error(d));
            }
            ConstState::Todo => {}
        }
        self.consts[i].state = ConstState::Busy;
        let result = self.eval_const_item(i);
        self.consts[i].state = match &result {
            Ok((s, v)) => ConstState::Done(*s, v.clone()),
            Err(Reported) => ConstState::Failed,
        };
        result
    }

    fn eval_const_item(&mut self, i: usize) -> Res<(Scalar, ConstValue)> {
        let ConstSlot { file, item, .. } = self.consts[i];
        let ty = types::resolve(self, &item.ty, types::Usage::Const)?;
        let Type::Scalar(s) = ty else {
            unreachable!("Usage::Const admits scalars only")
        };
        let mut cx = FnCx::new(self, file, Context::Const);
        let value = cx.constant(&item.value, s, "a constant's value")?;
        Ok((s, value))
    }

    fn device_fn(&mut self, i: usize) -> Option<Checked> {
        let FnSlot { file, item, .. } = self.fns[i];
        let sig = self.fns[i].sig.clone()?;
        let name = self.file_name(file);
        let mut cx = FnCx::new(
            self,
            file,
            Context::Device {
                ret: sig.ret.clone(),
            },
        );
        let params = sig
            .params
            .iter()
            .map(|(name, ty, span)| cx.declare_param(name, ty.clone(), *span))
            .collect();
        let body = cx.body(&item.body);
        // After an error a `return` may have been dropped; do not blame the missing one.
        if sig.ret != Type::Void && !cx.failed() && !body::always_returns(&body) {
            cx.error(Diagnostic::error(
                format!(
                    "function `{}` can reach its end without returning a `{}`",
                    item.name.name, sig.ret
                ),
                item.name.span,
            ));
        }
        let (vars, _, calls, failed) = cx.finish();
        if failed {
            return None;
        }
        Some(Checked {
            function: ir::Function {
                name: item.name.name.clone(),
                kind: ir::FunctionKind::Device,
                params,
                ret: sig.ret,
                vars,
                shared: vec![],
                body,
                span: item.span,
                file: name.to_string(),
            },
            calls,
        })
    }
}

/// Evaluate a checked expression that must be a compile-time constant, reporting why not.
fn eval_or_report(ck: &mut Checker<'_>, e: &ir::Expr, what: &str) -> Res<ConstValue> {
    consteval::eval(e).map_err(|err| {
        let d = match err {
            consteval::ConstError::NotConst(at) => {
                let d =
                    Diagnostic::error(format!("{what} must be a compile-time constant"), e.span);
                if at == e.span {
                    d
                } else {
                    d.with_note("this part is only known at run time", Some(at))
                }
            }
            other => Diagnostic::error(other.message(), other.span()),
        };
        ck.error(d)
    })
}
