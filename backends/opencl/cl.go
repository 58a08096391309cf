package opencl

import (
	"errors"
	"fmt"
	"unsafe"
)

// This file is the whole binding: the OpenCL 1.2 entry points gnnkit
// calls, as Go function variables that dl.go fills in from libOpenCL at
// run time (purego, no cgo). Each entry of clTable carries the C
// prototype from CL/cl.h; TestSignatureTable checks every Go signature
// against it, so a wrong width (cl_bitfield is 64-bit, cl_bool 32-bit)
// fails a test instead of corrupting a call.
//
// C to Go: cl_int int32; cl_uint, cl_bool and the *_info enums uint32;
// cl_bitfield and its aliases (cl_device_type, cl_mem_flags,
// cl_command_queue_properties) uint64; size_t uintptr; object handles
// (cl_platform_id, cl_mem, ...) named uintptr types; void * and
// function pointers unsafe.Pointer or uintptr; const char * string
// (purego copies it for the call); other T * a Go *T.

// OpenCL object handles (opaque pointers).
type (
	clPlatformID uintptr
	clDeviceID   uintptr
	clContext    uintptr
	clQueue      uintptr
	clMem        uintptr
	clProgram    uintptr
	clKernel     uintptr
	clEvent      uintptr
)

// The entry points, filled in by loadLibrary.
var (
	clGetPlatformIDs             func(numEntries uint32, platforms *clPlatformID, numPlatforms *uint32) int32
	clGetPlatformInfo            func(p clPlatformID, name uint32, size uintptr, value unsafe.Pointer, sizeRet *uintptr) int32
	clGetDeviceIDs               func(p clPlatformID, typ uint64, numEntries uint32, devices *clDeviceID, numDevices *uint32) int32
	clGetDeviceInfo              func(d clDeviceID, name uint32, size uintptr, value unsafe.Pointer, sizeRet *uintptr) int32
	clCreateContext              func(props *uintptr, numDevices uint32, devices *clDeviceID, notify uintptr, user uintptr, errcode *int32) clContext
	clReleaseContext             func(c clContext) int32
	clCreateCommandQueue         func(c clContext, d clDeviceID, props uint64, errcode *int32) clQueue
	clReleaseCommandQueue        func(q clQueue) int32
	clCreateBuffer               func(c clContext, flags uint64, size uintptr, host unsafe.Pointer, errcode *int32) clMem
	clReleaseMemObject           func(m clMem) int32
	clCreateProgramWithSource    func(c clContext, count uint32, strings unsafe.Pointer, lengths *uintptr, errcode *int32) clProgram
	clBuildProgram               func(p clProgram, numDevices uint32, devices *clDeviceID, options string, notify uintptr, user uintptr) int32
	clGetProgramBuildInfo        func(p clProgram, d clDeviceID, name uint32, size uintptr, value unsafe.Pointer, sizeRet *uintptr) int32
	clReleaseProgram             func(p clProgram) int32
	clCreateKernel               func(p clProgram, name string, errcode *int32) clKernel
	clReleaseKernel              func(k clKernel) int32
	clSetKernelArg               func(k clKernel, index uint32, size uintptr, value unsafe.Pointer) int32
	clEnqueueNDRangeKernel       func(q clQueue, k clKernel, dim uint32, offset *uintptr, global *uintptr, local *uintptr, numEvents uint32, waitList *clEvent, event *clEvent) int32
	clEnqueueReadBuffer          func(q clQueue, m clMem, blocking uint32, offset uintptr, size uintptr, ptr unsafe.Pointer, numEvents uint32, waitList *clEvent, event *clEvent) int32
	clEnqueueWriteBuffer         func(q clQueue, m clMem, blocking uint32, offset uintptr, size uintptr, ptr unsafe.Pointer, numEvents uint32, waitList *clEvent, event *clEvent) int32
	clEnqueueFillBuffer          func(q clQueue, m clMem, pattern unsafe.Pointer, patternSize uintptr, offset uintptr, size uintptr, numEvents uint32, waitList *clEvent, event *clEvent) int32
	clEnqueueMarkerWithWaitList  func(q clQueue, numEvents uint32, waitList *clEvent, event *clEvent) int32
	clEnqueueBarrierWithWaitList func(q clQueue, numEvents uint32, waitList *clEvent, event *clEvent) int32
	clWaitForEvents              func(numEvents uint32, events *clEvent) int32
	clReleaseEvent               func(e clEvent) int32
	clFinish                     func(q clQueue) int32
)

// clEntry is one row of the signature table.
type clEntry struct {
	name  string
	fptr  any    // pointer to the Go function variable
	proto string // the C prototype (CL/cl.h, OpenCL 1.2; callbacks as void *)
}

// clTable lists every entry point the backend uses. OpenCL 1.2 is the
// floor: clEnqueueFillBuffer and the *WithWaitList calls are 1.2.
var clTable = []clEntry{
	{"clGetPlatformIDs", &clGetPlatformIDs, "cl_int clGetPlatformIDs(cl_uint num_entries, cl_platform_id *platforms, cl_uint *num_platforms)"},
	{"clGetPlatformInfo", &clGetPlatformInfo, "cl_int clGetPlatformInfo(cl_platform_id platform, cl_platform_info param_name, size_t param_value_size, void *param_value, size_t *param_value_size_ret)"},
	{"clGetDeviceIDs", &clGetDeviceIDs, "cl_int clGetDeviceIDs(cl_platform_id platform, cl_device_type device_type, cl_uint num_entries, cl_device_id *devices, cl_uint *num_devices)"},
	{"clGetDeviceInfo", &clGetDeviceInfo, "cl_int clGetDeviceInfo(cl_device_id device, cl_device_info param_name, size_t param_value_size, void *param_value, size_t *param_value_size_ret)"},
	{"clCreateContext", &clCreateContext, "cl_context clCreateContext(const cl_context_properties *properties, cl_uint num_devices, const cl_device_id *devices, void *pfn_notify, void *user_data, cl_int *errcode_ret)"},
	{"clReleaseContext", &clReleaseContext, "cl_int clReleaseContext(cl_context context)"},
	{"clCreateCommandQueue", &clCreateCommandQueue, "cl_command_queue clCreateCommandQueue(cl_context context, cl_device_id device, cl_command_queue_properties properties, cl_int *errcode_ret)"},
	{"clReleaseCommandQueue", &clReleaseCommandQueue, "cl_int clReleaseCommandQueue(cl_command_queue command_queue)"},
	{"clCreateBuffer", &clCreateBuffer, "cl_mem clCreateBuffer(cl_context context, cl_mem_flags flags, size_t size, void *host_ptr, cl_int *errcode_ret)"},
	{"clReleaseMemObject", &clReleaseMemObject, "cl_int clReleaseMemObject(cl_mem memobj)"},
	{"clCreateProgramWithSource", &clCreateProgramWithSource, "cl_program clCreateProgramWithSource(cl_context context, cl_uint count, const char **strings, const size_t *lengths, cl_int *errcode_ret)"},
	{"clBuildProgram", &clBuildProgram, "cl_int clBuildProgram(cl_program program, cl_uint num_devices, const cl_device_id *device_list, const char *options, void *pfn_notify, void *user_data)"},
	{"clGetProgramBuildInfo", &clGetProgramBuildInfo, "cl_int clGetProgramBuildInfo(cl_program program, cl_device_id device, cl_program_build_info param_name, size_t param_value_size, void *param_value, size_t *param_value_size_ret)"},
	{"clReleaseProgram", &clReleaseProgram, "cl_int clReleaseProgram(cl_program program)"},
	{"clCreateKernel", &clCreateKernel, "cl_kernel clCreateKernel(cl_program program, const char *kernel_name, cl_int *errcode_ret)"},
	{"clReleaseKernel", &clReleaseKernel, "cl_int clReleaseKernel(cl_kernel kernel)"},
	{"clSetKernelArg", &clSetKernelArg, "cl_int clSetKernelArg(cl_kernel kernel, cl_uint arg_index, size_t arg_size, const void *arg_value)"},
	{"clEnqueueNDRangeKernel", &clEnqueueNDRangeKernel, "cl_int clEnqueueNDRangeKernel(cl_command_queue command_queue, cl_kernel kernel, cl_uint work_dim, const size_t *global_work_offset, const size_t *global_work_size, const size_t *local_work_size, cl_uint num_events_in_wait_list, const cl_event *event_wait_list, cl_event *event)"},
	{"clEnqueueReadBuffer", &clEnqueueReadBuffer, "cl_int clEnqueueReadBuffer(cl_command_queue command_queue, cl_mem buffer, cl_bool blocking_read, size_t offset, size_t size, void *ptr, cl_uint num_events_in_wait_list, const cl_event *event_wait_list, cl_event *event)"},
	{"clEnqueueWriteBuffer", &clEnqueueWriteBuffer, "cl_int clEnqueueWriteBuffer(cl_command_queue command_queue, cl_mem buffer, cl_bool blocking_write, size_t offset, size_t size, const void *ptr, cl_uint num_events_in_wait_list, const cl_event *event_wait_list, cl_event *event)"},
	{"clEnqueueFillBuffer", &clEnqueueFillBuffer, "cl_int clEnqueueFillBuffer(cl_command_queue command_queue, cl_mem buffer, const void *pattern, size_t pattern_size, size_t offset, size_t size, cl_uint num_events_in_wait_list, const cl_event *event_wait_list, cl_event *event)"},
	{"clEnqueueMarkerWithWaitList", &clEnqueueMarkerWithWaitList, "cl_int clEnqueueMarkerWithWaitList(cl_command_queue command_queue, cl_uint num_events_in_wait_list, const cl_event *event_wait_list, cl_event *event)"},
	{"clEnqueueBarrierWithWaitList", &clEnqueueBarrierWithWaitList, "cl_int clEnqueueBarrierWithWaitList(cl_command_queue command_queue, cl_uint num_events_in_wait_list, const cl_event *event_wait_list, cl_event *event)"},
	{"clWaitForEvents", &clWaitForEvents, "cl_int clWaitForEvents(cl_uint num_events, const cl_event *event_list)"},
	{"clReleaseEvent", &clReleaseEvent, "cl_int clReleaseEvent(cl_event event)"},
	{"clFinish", &clFinish, "cl_int clFinish(cl_command_queue command_queue)"},
}

// Constants from CL/cl.h and CL/cl_ext.h.
const (
	clSuccess                    = 0
	clDeviceNotFound             = -1
	clBuildProgramFailure        = -11
	clPlatformNotFoundKHR        = -1001
	clTrue                uint32 = 1

	clPlatformVersion = 0x0901
	clPlatformName    = 0x0902
	clPlatformVendor  = 0x0903

	clDeviceTypeCPU         uint64 = 1 << 1
	clDeviceTypeGPU         uint64 = 1 << 2
	clDeviceTypeAccelerator uint64 = 1 << 3
	clDeviceTypeAll         uint64 = 0xFFFFFFFF

	clDeviceType              = 0x1000
	clDeviceMaxComputeUnits   = 0x1002
	clDeviceMaxWorkGroupSize  = 0x1004
	clDeviceMaxMemAllocSize   = 0x1010
	clDeviceGlobalMemSize     = 0x101F
	clDeviceLocalMemSize      = 0x1023
	clDeviceAvailable         = 0x1027
	clDeviceCompilerAvailable = 0x1028
	clDeviceName              = 0x102B
	clDeviceVendor            = 0x102C
	clDriverVersion           = 0x102D
	clDeviceVersion           = 0x102F
	clDeviceExtensions        = 0x1030
	clDeviceOpenCLCVersion    = 0x103D

	clContextPlatform = 0x1084

	clMemReadWrite   uint64 = 1 << 0
	clMemReadOnly    uint64 = 1 << 2
	clMemCopyHostPtr uint64 = 1 << 5

	clProgramBuildLog = 0x1183
)

// ErrUnavailable reports that no OpenCL implementation could be used:
// libOpenCL is missing, or it found no platform (ICD) with a usable
// device. Tests skip on it.
var ErrUnavailable = errors.New("opencl: unavailable (no OpenCL ICD found)")

// Error is a failed OpenCL call: the API function and its status code.
type Error struct {
	Code int32  // the cl_int status, e.g. -4 (CL_MEM_OBJECT_ALLOCATION_FAILURE)
	Op   string // the call, e.g. "clCreateBuffer"
}

func (e *Error) Error() string {
	return fmt.Sprintf("opencl: %s: %s (%d)", e.Op, CodeName(e.Code), e.Code)
}

// check turns a status into an *Error (nil on CL_SUCCESS).
func check(op string, code int32) error {
	if code == clSuccess {
		return nil
	}
	return &Error{Code: code, Op: op}
}

var codeNames = map[int32]string{
	0: "CL_SUCCESS", -1: "CL_DEVICE_NOT_FOUND", -2: "CL_DEVICE_NOT_AVAILABLE",
	-3: "CL_COMPILER_NOT_AVAILABLE", -4: "CL_MEM_OBJECT_ALLOCATION_FAILURE",
	-5: "CL_OUT_OF_RESOURCES", -6: "CL_OUT_OF_HOST_MEMORY",
	-7: "CL_PROFILING_INFO_NOT_AVAILABLE", -8: "CL_MEM_COPY_OVERLAP",
	-11: "CL_BUILD_PROGRAM_FAILURE", -12: "CL_MAP_FAILURE",
	-13: "CL_MISALIGNED_SUB_BUFFER_OFFSET", -14: "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
	-30: "CL_INVALID_VALUE", -31: "CL_INVALID_DEVICE_TYPE", -32: "CL_INVALID_PLATFORM",
	-33: "CL_INVALID_DEVICE", -34: "CL_INVALID_CONTEXT", -35: "CL_INVALID_QUEUE_PROPERTIES",
	-36: "CL_INVALID_COMMAND_QUEUE", -37: "CL_INVALID_HOST_PTR", -38: "CL_INVALID_MEM_OBJECT",
	-42: "CL_INVALID_BINARY", -43: "CL_INVALID_BUILD_OPTIONS", -44: "CL_INVALID_PROGRAM",
	-45: "CL_INVALID_PROGRAM_EXECUTABLE", -46: "CL_INVALID_KERNEL_NAME",
	-47: "CL_INVALID_KERNEL_DEFINITION", -48: "CL_INVALID_KERNEL", -49: "CL_INVALID_ARG_INDEX",
	-50: "CL_INVALID_ARG_VALUE", -51: "CL_INVALID_ARG_SIZE", -52: "CL_INVALID_KERNEL_ARGS",
	-53: "CL_INVALID_WORK_DIMENSION", -54: "CL_INVALID_WORK_GROUP_SIZE",
	-55: "CL_INVALID_WORK_ITEM_SIZE", -56: "CL_INVALID_GLOBAL_OFFSET",
	-57: "CL_INVALID_EVENT_WAIT_LIST", -58: "CL_INVALID_EVENT", -59: "CL_INVALID_OPERATION",
	-61: "CL_INVALID_BUFFER_SIZE", -63: "CL_INVALID_GLOBAL_WORK_SIZE",
	-1001: "CL_PLATFORM_NOT_FOUND_KHR",
}

// CodeName is the CL/cl.h name of an OpenCL status code.
func CodeName(code int32) string {
	if n, ok := codeNames[code]; ok {
		return n
	}
	return "CL_ERROR"
}
