/* Unit test of user/symbolize.c (kernel, PIE, libc via debug file, PLT, stripped library,
 * anonymous memory, vDSO, exited process). Needs -lelf -ldl, and cc + strip at run time for
 * the stripped library (that part is skipped without them). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

#include "symbolize.h"

#include "check.h"

__attribute__((noinline)) int local_function(int x)
{
	return x * 7 + 3;
}

static uint64_t kallsyms_addr(const char *want)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[512], name[256], type;
	unsigned long long a;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %255s", &a, &type, name) == 3 && !strcmp(name, want)) {
			fclose(f);
			return a;
		}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	struct symbolizer *s = symbolizer_new();
	struct proc_maps *m;
	char buf[512];
	enum sym_result r;
	void *lib, *mc;
	int (*exported)(int);
	void *(*hidden)(void);
	const char *ks;
	uint64_t ka;

	CHECK(s, "symbolizer_new");

	/* kernel */
	ka = kallsyms_addr("tcp_sendmsg");
	if (ka) {
		ks = symbolize_kernel(s, ka + 4);
		CHECK(ks && !strcmp(ks, "tcp_sendmsg"), "kernel: %s", ks ? ks : "(null)");
		ks = symbolize_kernel(s, ka);
		CHECK(ks && !strcmp(ks, "tcp_sendmsg"), "kernel start: %s", ks ? ks : "(null)");
	} else {
		fprintf(stderr, "skip kernel (kallsyms unreadable)\n");
	}
	CHECK(symbolize_kernel(s, 16) == NULL, "kernel: address 16");

	char dir[] = "/tmp/test_symbolize.XXXXXX", cmd[1024], so[512];
	int have_dir = 0;

	{
		FILE *src;

		lib = NULL;
		if (argc > 1) {
			lib = dlopen(argv[1], RTLD_NOW);
		} else if (mkdtemp(dir)) {
			have_dir = 1;
			snprintf(so, sizeof(so), "%s/hidden.c", dir);
			src = fopen(so, "w");
			if (src) {
				fputs("static __attribute__((noinline)) int hidden_fn(int x)"
				      " { return x * 3 + 1; }\n"
				      "int exported_fn(int x) { return hidden_fn(x) + 1; }\n"
				      "void *hidden_addr(void) { return (void *)hidden_fn; }\n", src);
				fclose(src);
			}
			snprintf(cmd, sizeof(cmd),
				 "cc -O2 -shared -fPIC %s/hidden.c -o %s/libhidden.so 2>/dev/null && "
				 "strip --strip-all %s/libhidden.so", dir, dir, dir);
			snprintf(so, sizeof(so), "%s/libhidden.so", dir);
			if (system(cmd) == 0)
				lib = dlopen(so, RTLD_NOW);
			else
				fprintf(stderr, "skip stripped library (no cc or strip)\n");
		}
	}
	exported = lib ? (int (*)(int))dlsym(lib, "exported_fn") : NULL;
	hidden = lib ? (void *(*)(void))dlsym(lib, "hidden_addr") : NULL;
	mc = dlsym(RTLD_DEFAULT, "memcpy"); /* the IFUNC's choice */

	m = proc_maps_read(getpid());
	CHECK(m, "proc_maps_read(self)");

	/* PIE executable, .symtab */
	r = symbolize_user(s, m, (uint64_t)(uintptr_t)local_function + 2, buf, sizeof(buf));
	CHECK(r == SYM_FUNC && !strcmp(buf, "local_function"), "PIE: %d %s", r, buf);
	r = symbolize_user(s, m, (uint64_t)(uintptr_t)main, buf, sizeof(buf));
	CHECK(r == SYM_FUNC && !strcmp(buf, "main"), "main: %d %s", r, buf);

	/* libc's memcpy variant, named from the debug file (or at least .dynsym) */
	r = symbolize_user(s, m, (uint64_t)(uintptr_t)mc + 1, buf, sizeof(buf));
	CHECK(r == SYM_FUNC && strstr(buf, "mem"), "memcpy: %d %s", r, buf);
	printf("memcpy resolves to %s\n", buf);

	/* stripped library: exported through .dynsym, static function as [module] */
	if (exported && hidden) {
		r = symbolize_user(s, m, (uint64_t)(uintptr_t)exported, buf, sizeof(buf));
		CHECK(r == SYM_FUNC && !strcmp(buf, "exported_fn"), "stripped exported: %d %s", r,
		      buf);
		r = symbolize_user(s, m, (uint64_t)(uintptr_t)hidden(), buf, sizeof(buf));
		CHECK(r == SYM_MODULE && !strcmp(buf, "[libhidden.so]"), "stripped static: %d %s",
		      r, buf);
	}

	/* anonymous memory */
	{
		void *heap = malloc(64);

		r = symbolize_user(s, m, (uint64_t)(uintptr_t)heap, buf, sizeof(buf));
		CHECK(r == SYM_UNKNOWN && !strcmp(buf, "[unknown]"), "heap: %d %s", r, buf);
		free(heap);
		r = symbolize_user(s, NULL, (uint64_t)(uintptr_t)main, buf, sizeof(buf));
		CHECK(r == SYM_UNKNOWN && !strcmp(buf, "[unknown]"), "no maps: %d %s", r, buf);
	}

	/* vDSO */
	{
		unsigned long vdso = getauxval(AT_SYSINFO_EHDR);
		void *cg = dlsym(RTLD_DEFAULT, "__vdso_clock_gettime");

		(void)cg;
		if (vdso) {
			/* some address in the vDSO text: any named symbol or [vdso] */
			int i, named = 0;

			for (i = 0; i < 4096 && !named; i += 16) {
				r = symbolize_user(s, m, vdso + 0x600 + i, buf, sizeof(buf));
				named = r == SYM_FUNC;
			}
			CHECK(named, "vdso: no symbol in the vDSO text (%s)", buf);
			printf("vdso: %s\n", buf);
		}
	}

	/* return-address check and frame state */
	{
		uint64_t ret = (uint64_t)(uintptr_t)__builtin_return_address(0);

		CHECK(symbolize_is_return_address(s, m, ret), "return address into libc start");
		CHECK(!symbolize_is_return_address(s, m, (uint64_t)(uintptr_t)local_function),
		      "function start is no return address");
	}

	/* maps of an exited process */
	{
		pid_t c = fork();

		if (c == 0)
			_exit(0);
		waitpid(c, NULL, 0);
		CHECK(proc_maps_read(c) == NULL, "maps of an exited process");
	}

	/* parse: a deleted file's module name */
	{
		struct proc_maps *pm = proc_maps_parse(
			"7f0000000000-7f0000001000 r-xp 00000000 fd:01 12345     "
			"/nonexistent/libgone.so.1 (deleted)\n"
			"7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n");
		r = symbolize_user(s, pm, 0x7f0000000100, buf, sizeof(buf));
		CHECK(r == SYM_MODULE && !strcmp(buf, "[libgone.so.1]"), "deleted: %d %s", r, buf);
		r = symbolize_user(s, pm, 0x7f0000002100, buf, sizeof(buf));
		CHECK(r == SYM_UNKNOWN, "anon in parsed maps: %d %s", r, buf);
		proc_maps_free(pm);
	}

	proc_maps_free(m);
	symbolizer_free(s);
	if (lib)
		dlclose(lib);
	if (have_dir) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return check_report("test_symbolize");
}
