//! Runtime tests on a real GPU. Without a CUDA driver each test prints why and passes.

use zinc_runtime::half::f16;
use zinc_runtime::{
    driver_present, time_median_ms, ActivationPool, Arg, Blas, Device, Grid, KernelSignature,
    LaunchError, RuntimeError,
};

/// Hand-written PTX so these tests do not depend on the compiler.
const VADD_PTX: &str = r#"
.version 7.8
.target sm_80
.address_size 64

.visible .entry vadd(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 pn)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pc];
    ld.param.u32 %r1, [pn];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.u32 %rd7, %r5, 4;
    add.s64 %rd8, %rd4, %rd7;
    ld.global.f32 %f1, [%rd8];
    add.s64 %rd8, %rd5, %rd7;
    ld.global.f32 %f2, [%rd8];
    add.f32 %f3, %f1, %f2;
    add.s64 %rd8, %rd6, %rd7;
    st.global.f32 [%rd8], %f3;
DONE:
    ret;
}
"#;

const VADD_SIG: &str = r#"{"name": "vadd",
    "params": [
        {"name": "a", "kind": "view", "space": "global", "elem": "f32"},
        {"name": "b", "kind": "view", "space": "global", "elem": "f32"},
        {"name": "c", "kind": "view", "space": "global", "elem": "f32", "mutable": true},
        {"name": "n", "kind": "scalar", "type": "u32"}],
    "block": [128, 1, 1], "grid": ["cdiv(n, 128)", "1", "1"]}"#;

fn gpu(test: &str) -> Option<Device> {
    if !driver_present() {
        println!("skipping {test}: no CUDA driver (libcuda.so)");
        return None;
    }
    match Device::new(0) {
        Ok(dev) => Some(dev),
        Err(RuntimeError::NoDevice { .. }) => {
            println!("skipping {test}: no CUDA device");
            None
        }
        Err(e) => panic!("opening device 0: {e}"),
    }
}

fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let a = (0..n).map(|i| (i % 97) as f32 * 0.5 + 1.0).collect();
    let b = (0..n).map(|i| (i % 89) as f32 * -0.25 - 1.0).collect();
    (a, b)
}

#[test]
fn properties_are_plausible() {
    let Some(dev) = gpu("properties_are_plausible") else {
        return;
    };
    let p = dev.props();
    println!("{p:?}");
    assert!(p.sm_count > 0 && p.max_threads_per_block >= 1024);
    assert!(p.max_shared_per_block_optin >= p.max_shared_per_block);
    assert!(p.total_memory > 0 && p.l2_bytes > 0);
}

#[test]
fn typed_launch_of_handwritten_ptx() {
    let Some(dev) = gpu("typed_launch_of_handwritten_ptx") else {
        return;
    };
    let stream = dev.default_stream();
    let kernel = dev
        .load_kernel(
            "vadd",
            VADD_PTX,
            KernelSignature::from_json(VADD_SIG).unwrap(),
        )
        .unwrap();
    let n = 100_003;
    let (a_host, b_host) = inputs(n);
    let a = stream.upload(&a_host).unwrap();
    let b = stream.upload(&b_host).unwrap();
    let mut c = stream.upload(&vec![f32::NAN; n]).unwrap();
    let dims = kernel
        .launch(
            &stream,
            Grid::Auto,
            &mut [
                Arg::from(&a),
                Arg::from(&b),
                Arg::from(&mut c),
                Arg::from(n as u32),
            ],
        )
        .unwrap();
    assert_eq!(dims.grid, [782, 1, 1]);
    let c_host = stream.download(&c).unwrap();
    for i in 0..n {
        assert_eq!(c_host[i], a_host[i] + b_host[i], "element {i}");
    }

    // The check runs before the driver sees anything.
    let err = kernel
        .launch(
            &stream,
            Grid::Auto,
            &mut [
                Arg::from(&a),
                Arg::from(&b),
                Arg::from(&c),
                Arg::from(n as u32),
            ],
        )
        .unwrap_err();
    assert!(matches!(
        err,
        RuntimeError::Launch(LaunchError::NotMutable { .. })
    ));

    let ms = time_median_ms(&stream, 2, 10, || {
        kernel
            .launch(
                &stream,
                Grid::Auto,
                &mut [
                    Arg::from(&a),
                    Arg::from(&b),
                    Arg::from(&mut c),
                    Arg::from(n as u32),
                ],
            )
            .map(drop)
    })
    .unwrap();
    assert!(ms > 0.0);
}

#[test]
fn modules_are_cached_and_jit_errors_carry_the_log() {
    let Some(dev) = gpu("modules_are_cached_and_jit_errors_carry_the_log") else {
        return;
    };
    let first = dev.load_module("vadd", VADD_PTX).unwrap();
    let again = dev.load_module("vadd", "not even PTX").unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &again));

    let broken = VADD_PTX.replace("add.f32 %f3, %f1, %f2;", "add.f32 %f3, %f1, %nope;");
    match dev.load_module("broken", &broken) {
        Err(RuntimeError::ModuleLoad { log, .. }) => {
            println!("JIT log: {log}");
            assert!(!log.is_empty());
        }
        other => panic!("expected a JIT error, got {other:?}"),
    }
    let sig = KernelSignature::from_json(&VADD_SIG.replace("\"vadd\"", "\"missing\"")).unwrap();
    assert!(matches!(
        dev.load_kernel("vadd", VADD_PTX, sig),
        Err(RuntimeError::KernelNotFound { .. })
    ));
}

#[test]
fn buffers_round_trip_every_element_type() {
    let Some(dev) = gpu("buffers_round_trip_every_element_type") else {
        return;
    };
    let stream = dev.default_stream();
    let halves: Vec<f16> = (0..1000).map(|i| f16::from_f32(i as f32 * 0.5)).collect();
    assert_eq!(
        stream.download(&stream.upload(&halves).unwrap()).unwrap(),
        halves
    );
    let bytes: Vec<u8> = (0..=255).collect();
    assert_eq!(
        stream.download(&stream.upload(&bytes).unwrap()).unwrap(),
        bytes
    );
    let ints: Vec<i32> = (-500..500).collect();
    let mut buf = stream.alloc_zeros::<i32>(ints.len()).unwrap();
    assert!(stream.download(&buf).unwrap().iter().all(|&v| v == 0));
    stream.copy_to_device(&ints, &mut buf).unwrap();
    let mut back = vec![0; ints.len()];
    stream.copy_to_host(&buf, &mut back).unwrap();
    assert_eq!(back, ints);
    assert!(matches!(
        stream.copy_to_device(&ints[1..], &mut buf),
        Err(RuntimeError::Length { .. })
    ));
    let empty = stream.upload::<f32>(&[]).unwrap();
    assert!(stream.download(&empty).unwrap().is_empty());
}

#[test]
fn pool_reuses_allocations() {
    let Some(dev) = gpu("pool_reuses_allocations") else {
        return;
    };
    let stream = dev.default_stream();
    let mut pool = ActivationPool::new(stream.clone());
    let a = pool.alloc::<f32>(1000).unwrap();
    assert_eq!(a.capacity_bytes(), 4096);
    pool.release(a);
    assert_eq!(pool.cached_bytes(), 4096);
    // Same class, other element type.
    let mut b = pool.alloc::<f16>(2000).unwrap();
    assert_eq!(pool.cached_bytes(), 0);
    let host: Vec<f16> = (0..2000).map(|i| f16::from_f32(i as f32)).collect();
    stream.copy_to_device(&host, &mut b).unwrap();
    assert_eq!(stream.download(&b).unwrap(), host);
    pool.release(b);
    pool.trim();
    assert_eq!(pool.cached_bytes(), 0);
}

#[test]
fn cublas_gemm_matches_cpu() {
    let Some(dev) = gpu("cublas_gemm_matches_cpu") else {
        return;
    };
    let stream = dev.default_stream();
    let blas = Blas::new(&stream).unwrap();
    let (t, n, k) = (33, 65, 129);
    let val = |i: usize| f16::from_f32(((i * 37 % 17) as f32 - 8.0) / 8.0);
    let x_host: Vec<f16> = (0..t * k).map(val).collect();
    let w_host: Vec<f16> = (0..n * k).map(|i| val(i + 5)).collect();
    let x = stream.upload(&x_host).unwrap();
    let w = stream.upload(&w_host).unwrap();
    let mut y = stream.alloc::<f32>(t * n).unwrap();
    blas.gemm_f16(t, n, k, &x, &w, &mut y).unwrap();
    let y_host = stream.download(&y).unwrap();
    for row in 0..t {
        for col in 0..n {
            let want: f32 = (0..k)
                .map(|i| x_host[row * k + i].to_f32() * w_host[col * k + i].to_f32())
                .sum();
            let got = y_host[row * n + col];
            assert!(
                (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                "Y[{row}][{col}]: {got} vs {want}"
            );
        }
    }
    let mut small = stream.alloc::<f32>(1).unwrap();
    assert!(matches!(
        blas.gemm_f16(t, n, k, &x, &w, &mut small),
        Err(RuntimeError::TooSmall { .. })
    ));
}

#[test]
fn graph_capture_replays_launches() {
    let Some(dev) = gpu("graph_capture_replays_launches") else {
        return;
    };
    // SAFETY: everything below runs on one stream.
    unsafe { dev.disable_event_tracking() };
    let stream = dev.new_stream().unwrap();
    let kernel = dev
        .load_kernel(
            "vadd",
            VADD_PTX,
            KernelSignature::from_json(VADD_SIG).unwrap(),
        )
        .unwrap();
    let n = 4096;
    let (a_host, b_host) = inputs(n);
    let a = stream.upload(&a_host).unwrap();
    let b = stream.upload(&b_host).unwrap();
    let mut c = stream.alloc_zeros::<f32>(n).unwrap();
    stream.synchronize().unwrap();
    let graph = stream
        .capture(|s| {
            kernel
                .launch(
                    s,
                    Grid::Auto,
                    &mut [
                        Arg::from(&a),
                        Arg::from(&b),
                        Arg::from(&mut c),
                        Arg::from(n as u32),
                    ],
                )
                .map(drop)
        })
        .unwrap();
    // Capture records without running.
    assert!(stream.download(&c).unwrap().iter().all(|&v| v == 0.0));
    graph.upload().unwrap();
    graph.launch().unwrap();
    let c_host = stream.download(&c).unwrap();
    assert_eq!(c_host[n - 1], a_host[n - 1] + b_host[n - 1]);
}
