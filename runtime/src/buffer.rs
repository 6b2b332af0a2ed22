//! Typed device buffers and host <-> device copies.
//!
//! A buffer keeps its memory as bytes (`CudaSlice<u8>`) and its element type in the type
//! parameter, so one allocation can be reused for any element type (see the pool) and kernel
//! arguments of every type pass through one path.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use crate::dtype::DeviceElem;
use crate::error::{During, Result, RuntimeError};
use crate::stream::Stream;

/// `len` elements of `T` in device memory.
#[derive(Debug)]
pub struct DeviceBuffer<T: DeviceElem> {
    raw: CudaSlice<u8>,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: DeviceElem> DeviceBuffer<T> {
    /// Wraps raw device bytes; `raw` must hold at least `len` elements.
    pub(crate) fn from_raw(raw: CudaSlice<u8>, len: usize) -> Self {
        debug_assert!(raw.len() >= len * size_of::<T>());
        DeviceBuffer {
            raw,
            len,
            _elem: PhantomData,
        }
    }

    pub(crate) fn into_raw(self) -> CudaSlice<u8> {
        self.raw
    }

    pub(crate) fn raw(&self) -> &CudaSlice<u8> {
        &self.raw
    }

    pub(crate) fn raw_mut(&mut self) -> &mut CudaSlice<u8> {
        &mut self.raw
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the underlying allocation (at least `len * size_of::<T>()`).
    pub fn capacity_bytes(&self) -> usize {
        self.raw.len()
    }

    /// A typed cudarc view, for cuBLAS and other cudarc APIs.
    pub fn view(&self) -> CudaView<'_, T> {
        // SAFETY: every DeviceElem is valid for any bit pattern; allocations are 256-byte aligned
        // and hold at least `len` elements.
        unsafe { self.raw.transmute(self.len) }.expect("buffer holds len elements")
    }

    pub fn view_mut(&mut self) -> CudaViewMut<'_, T> {
        let len = self.len;
        // SAFETY: as in `view`.
        unsafe { self.raw.transmute_mut(len) }.expect("buffer holds len elements")
    }
}

impl Stream {
    /// Allocates `len` elements with unspecified contents (any bit pattern is a valid `T`).
    pub fn alloc<T: DeviceElem>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        // cuMemAlloc rejects zero bytes; an empty buffer still gets a valid address.
        let bytes = (len * size_of::<T>()).max(1);
        // SAFETY: the bytes are only read as DeviceElem types, valid for any bit pattern.
        let raw = unsafe { self.inner.alloc::<u8>(bytes) }.during("allocating device memory")?;
        Ok(DeviceBuffer::from_raw(raw, len))
    }

    pub fn alloc_zeros<T: DeviceElem>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let mut buf = self.alloc(len)?;
        self.inner
            .memset_zeros(buf.raw_mut())
            .during("zeroing device memory")?;
        Ok(buf)
    }

    /// Copies `host` into a new device buffer.
    pub fn upload<T: DeviceElem>(&self, host: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buf = self.alloc(host.len())?;
        self.copy_to_device(host, &mut buf)?;
        Ok(buf)
    }

    /// Copies `host` into `dst`; the lengths must match.
    pub fn copy_to_device<T: DeviceElem>(
        &self,
        host: &[T],
        dst: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        check_len("host-to-device copy", dst.len(), host.len())?;
        if host.is_empty() {
            return Ok(());
        }
        self.inner
            .memcpy_htod(host, &mut dst.view_mut())
            .during("copying to the device")
    }

    /// Copies a device buffer into a new vector (waits for the copy).
    pub fn download<T: DeviceElem>(&self, src: &DeviceBuffer<T>) -> Result<Vec<T>> {
        if src.is_empty() {
            return Ok(Vec::new());
        }
        self.inner
            .clone_dtoh(&src.view())
            .during("copying to the host")
    }

    /// Copies `src` into `host`; the lengths must match.
    pub fn copy_to_host<T: DeviceElem>(&self, src: &DeviceBuffer<T>, host: &mut [T]) -> Result<()> {
        check_len("device-to-host copy", src.len(), host.len())?;
        if host.is_empty() {
            return Ok(());
        }
        self.inner
            .memcpy_dtoh(&src.view(), host)
            .during("copying to the host")
    }
}

fn check_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(RuntimeError::Length {
            what,
            expected,
            got,
        })
    }
}
