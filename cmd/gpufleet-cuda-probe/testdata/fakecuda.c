/*
 * A stand-in for the NVIDIA driver's libcuda.so.1, for tests on machines
 * without a GPU. It exports the driver API calls the CUDA probe makes and,
 * like the real driver, cuInit starts a thread and names it through
 * /proc/self/task/<tid>/comm (glibc's pthread_setname_np does so for a
 * thread other than the caller); where that write is denied, cuInit fails
 * with 304, CUDA_ERROR_OPERATING_SYSTEM, as the driver did on an H200 under
 * a sandbox that made /proc read-only. The device count comes from
 * $FAKE_CUDA_DEVICES (default 1).
 *
 *   gcc -shared -fPIC -o libcuda.so.1 fakecuda.c -lpthread
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;

static int initialised;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *event_handler(void *arg) {
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;)
		pthread_cond_wait(&never, &mu);
	return NULL;
}

CUresult cuInit(unsigned int flags) {
	pthread_t t;
	(void)flags;
	if (pthread_create(&t, NULL, event_handler, NULL) != 0)
		return 304;
	if (pthread_setname_np(t, "cuda-EvtHandlr") != 0)
		return 304;
	initialised = 1;
	return 0;
}

CUresult cuDriverGetVersion(int *v) {
	*v = 13000;
	return 0;
}

static int devices(void) {
	const char *s = getenv("FAKE_CUDA_DEVICES");
	return s ? atoi(s) : 1;
}

CUresult cuDeviceGetCount(int *n) {
	if (!initialised)
		return 3;
	*n = devices();
	return 0;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	if (!initialised)
		return 3;
	if (ordinal < 0 || ordinal >= devices())
		return 101;
	*d = ordinal;
	return 0;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	if (!initialised)
		return 3;
	strncpy(name, "Fake GPU", len);
	name[len - 1] = 0;
	(void)d;
	return 0;
}

CUresult cuGetErrorName(CUresult code, const char **s) {
	switch (code) {
	case 0: *s = "CUDA_SUCCESS"; return 0;
	case 3: *s = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
	case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
	case 101: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
	case 304: *s = "CUDA_ERROR_OPERATING_SYSTEM"; return 0;
	}
	*s = NULL;
	return 1;
}
