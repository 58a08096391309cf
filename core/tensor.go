package core

import "fmt"

// DType is the element type of a tensor. Only Float32 is implemented today.
type DType uint8

const (
	Float32 DType = iota
)

func (d DType) String() string {
	switch d {
	case Float32:
		return "f32"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the size of one element in bytes.
func (d DType) Size() int { return 4 }

// Buffer is device memory behind a tensor. Each backend has its own
// concrete type; host-resident buffers also implement HostBuffer.
type Buffer interface {
	Device() DeviceID
	Len() int // elements
}

// HostBuffer is a Buffer whose elements live in Go memory.
type HostBuffer interface {
	Buffer
	Float32s() []float32
}

// HostMem is the host-memory Buffer used by the CPU backend and by tensors
// built on the host (NewHostTensor). Data is owned by the tensor.
type HostMem struct {
	Data []float32
	Dev  DeviceID
}

func (h *HostMem) Device() DeviceID    { return h.Dev }
func (h *HostMem) Len() int            { return len(h.Data) }
func (h *HostMem) Float32s() []float32 { return h.Data }

// Tensor is a dense row-major array on one device. Kernels treat every
// tensor as a matrix of Rows() x Cols(): the first dimension by the product
// of the rest. A tensor is a plain struct; who allocates it frees it
// (Device.Free), and no finalizer does.
type Tensor struct {
	Shape []int
	DType DType
	Buf   Buffer
}

// NewHostTensor wraps data (not copied) as a host tensor of the given shape.
func NewHostTensor(data []float32, shape ...int) (*Tensor, error) {
	n := NumElems(shape)
	if n != len(data) {
		return nil, fmt.Errorf("%w: host tensor of shape %v needs %d elements, got %d", ErrShape, shape, n, len(data))
	}
	return &Tensor{Shape: append([]int(nil), shape...), Buf: &HostMem{Data: data, Dev: HostDevice}}, nil
}

// NumElems is the product of the dimensions (1 for a scalar shape).
func NumElems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Rows is the first dimension (1 for a scalar).
func (t *Tensor) Rows() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.Shape[0]
}

// Cols is the product of all dimensions but the first.
func (t *Tensor) Cols() int {
	if len(t.Shape) <= 1 {
		return 1
	}
	return NumElems(t.Shape[1:])
}

// Len is the number of elements.
func (t *Tensor) Len() int { return NumElems(t.Shape) }

// Bytes is the size of the tensor's elements in bytes.
func (t *Tensor) Bytes() int64 { return int64(t.Len()) * int64(t.DType.Size()) }

// Device is the device holding the tensor.
func (t *Tensor) Device() DeviceID {
	if t.Buf == nil {
		return ""
	}
	return t.Buf.Device()
}

// F32 returns the host slice behind t, or nil when t is not host resident.
func (t *Tensor) F32() []float32 {
	if h, ok := t.Buf.(HostBuffer); ok {
		return h.Float32s()
	}
	return nil
}

func (t *Tensor) String() string {
	return fmt.Sprintf("Tensor%v@%s", t.Shape, t.Device())
}

// SameShape reports whether a and b have the same matrix view.
func SameShape(a, b *Tensor) bool { return a.Rows() == b.Rows() && a.Cols() == b.Cols() }

// CheckShape returns an ErrShape error naming op when t is not rows x cols.
// A negative rows or cols is not checked.
func CheckShape(op, name string, t *Tensor, rows, cols int) error {
	if t == nil {
		return fmt.Errorf("%w: %s: %s is nil", ErrShape, op, name)
	}
	if (rows >= 0 && t.Rows() != rows) || (cols >= 0 && t.Cols() != cols) {
		return fmt.Errorf("%w: %s: %s is %dx%d, want %dx%d", ErrShape, op, name, t.Rows(), t.Cols(), rows, cols)
	}
	return nil
}
