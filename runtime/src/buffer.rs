//! Typed device buffers and host <-> device copies.
//!
//! A buffer keeps its memory as bytes (`CudaSlice<u8>`, or host bytes on the emulated device)
//! and its element type in the type parameter, so one allocation can be reused for any element
//! type (see the pool) and kernel arguments of every type pass through one path.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use crate::dtype::DeviceElem;
use crate::error::{During, Result, RuntimeError};
use crate::stream::{Stream, StreamKind};

/// What unwritten emulated memory holds: all-ones bytes, NaN in every float type, so that reads
/// of memory nothing wrote show in the results (as the interpreter does for shared memory).
const UNWRITTEN: u8 = 0xff;

/// The bytes behind a buffer: device memory, or host memory on the emulated device.
#[derive(Debug)]
pub enum Storage {
    Cuda(CudaSlice<u8>),
    Host(Vec<u8>),
}

impl Storage {
    /// Bytes of the allocation.
    pub fn size_bytes(&self) -> usize {
        match self {
            Storage::Cuda(raw) => raw.len(),
            Storage::Host(bytes) => bytes.len(),
        }
    }
}

/// `len` elements of `T` in device memory.
#[derive(Debug)]
pub struct DeviceBuffer<T: DeviceElem> {
    raw: Storage,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: DeviceElem> DeviceBuffer<T> {
    /// Wraps raw bytes; `raw` must hold at least `len` elements.
    pub(crate) fn from_raw(raw: Storage, len: usize) -> Self {
        debug_assert!(raw.size_bytes() >= len * size_of::<T>());
        DeviceBuffer {
            raw,
            len,
            _elem: PhantomData,
        }
    }

    pub(crate) fn into_raw(self) -> Storage {
        self.raw
    }

    pub(crate) fn raw(&self) -> &Storage {
        &self.raw
    }

    pub(crate) fn raw_mut(&mut self) -> &mut Storage {
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
        self.raw.size_bytes()
    }

    /// A typed cudarc view, for cuBLAS and other cudarc APIs; `Emulated` for a buffer of the
    /// emulated device.
    pub fn view(&self) -> Result<CudaView<'_, T>> {
        let Storage::Cuda(raw) = &self.raw else {
            return Err(RuntimeError::Emulated("a cudarc view of a buffer"));
        };
        // SAFETY: every DeviceElem is valid for any bit pattern; allocations are 256-byte aligned
        // and hold at least `len` elements.
        Ok(unsafe { raw.transmute(self.len) }.expect("buffer holds len elements"))
    }

    pub fn view_mut(&mut self) -> Result<CudaViewMut<'_, T>> {
        let len = self.len;
        let Storage::Cuda(raw) = &mut self.raw else {
            return Err(RuntimeError::Emulated("a cudarc view of a buffer"));
        };
        // SAFETY: as in `view`.
        Ok(unsafe { raw.transmute_mut(len) }.expect("buffer holds len elements"))
    }
}

/// The bytes of `values`.
pub(crate) fn as_bytes<T: DeviceElem>(values: &[T]) -> &[u8] {
    // SAFETY: DeviceElem is sealed to plain integer and float types: no padding, no pointers.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), size_of_val(values)) }
}

/// Elements of `T` read from the first `out.len()` elements' worth of `bytes`.
fn read_elems<T: DeviceElem>(bytes: &[u8], out: &mut [T]) {
    let n = size_of_val(out);
    // SAFETY: `out` is `n` writable bytes, `bytes` has at least `n` (buffers hold `len`
    // elements), the two do not overlap, and any bit pattern is a valid DeviceElem.
    unsafe { std::ptr::copy_nonoverlapping(bytes[..n].as_ptr(), out.as_mut_ptr().cast(), n) }
}

impl Stream {
    /// Allocates `len` elements with unspecified contents (any bit pattern is a valid `T`).
    pub fn alloc<T: DeviceElem>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        Ok(DeviceBuffer::from_raw(
            self.alloc_bytes(len * size_of::<T>())?,
            len,
        ))
    }

    /// `bytes` of fresh memory with unspecified contents.
    pub(crate) fn alloc_bytes(&self, bytes: usize) -> Result<Storage> {
        match &self.kind {
            StreamKind::Cuda(stream) => {
                // cuMemAlloc rejects zero bytes; an empty buffer still gets a valid address.
                // SAFETY: the bytes are only read as DeviceElem types, valid for any bit pattern.
                let raw = unsafe { stream.alloc::<u8>(bytes.max(1)) }
                    .during("allocating device memory")?;
                Ok(Storage::Cuda(raw))
            }
            StreamKind::Emulated => Ok(Storage::Host(vec![UNWRITTEN; bytes])),
        }
    }

    pub fn alloc_zeros<T: DeviceElem>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let mut buf = self.alloc(len)?;
        self.fill_zeros(&mut buf)?;
        Ok(buf)
    }

    /// Queues setting every byte of `buf` to zero.
    pub fn fill_zeros<T: DeviceElem>(&self, buf: &mut DeviceBuffer<T>) -> Result<()> {
        match (&self.kind, buf.raw_mut()) {
            (StreamKind::Cuda(stream), Storage::Cuda(raw)) => {
                stream.memset_zeros(raw).during("zeroing device memory")
            }
            (_, Storage::Host(bytes)) => {
                bytes.fill(0);
                Ok(())
            }
            _ => Err(RuntimeError::WrongDevice),
        }
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
        match (&self.kind, &mut dst.raw) {
            (StreamKind::Cuda(stream), Storage::Cuda(_)) => stream
                .memcpy_htod(host, &mut dst.view_mut()?)
                .during("copying to the device"),
            (StreamKind::Emulated, Storage::Host(bytes)) => {
                let src = as_bytes(host);
                bytes[..src.len()].copy_from_slice(src);
                Ok(())
            }
            _ => Err(RuntimeError::WrongDevice),
        }
    }

    /// Copies a device buffer into a new vector (waits for the copy).
    pub fn download<T: DeviceElem>(&self, src: &DeviceBuffer<T>) -> Result<Vec<T>> {
        if src.is_empty() {
            return Ok(Vec::new());
        }
        match (&self.kind, &src.raw) {
            (StreamKind::Cuda(stream), Storage::Cuda(_)) => stream
                .clone_dtoh(&src.view()?)
                .during("copying to the host"),
            (StreamKind::Emulated, Storage::Host(bytes)) => {
                let mut out = vec![T::default(); src.len()];
                read_elems(bytes, &mut out);
                Ok(out)
            }
            _ => Err(RuntimeError::WrongDevice),
        }
    }

    /// Copies `src` into `host`; the lengths must match.
    pub fn copy_to_host<T: DeviceElem>(&self, src: &DeviceBuffer<T>, host: &mut [T]) -> Result<()> {
        check_len("device-to-host copy", src.len(), host.len())?;
        if host.is_empty() {
            return Ok(());
        }
        match (&self.kind, &src.raw) {
            (StreamKind::Cuda(stream), Storage::Cuda(_)) => stream
                .memcpy_dtoh(&src.view()?, host)
                .during("copying to the host"),
            (StreamKind::Emulated, Storage::Host(bytes)) => {
                read_elems(bytes, host);
                Ok(())
            }
            _ => Err(RuntimeError::WrongDevice),
        }
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
