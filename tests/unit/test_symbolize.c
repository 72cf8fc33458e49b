/* Unit test of user/frames.c on blazesym (kernel, PIE, libc via debug file, PLT, stripped
 * library, anonymous memory, vDSO, exited process, per-exec images, a C++ program demangled),
 * and of user/trace_helpers.c's kernel name lists (kallsyms, ftrace's functions).
 * Needs -lelf and blazesym's libraries, and cc + strip (the stripped library) and g++ (the C++
 * program) at run time. */
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frames.h"
#include "trace_helpers.h"

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

static const char *kernel_name(struct kaddrs *k, uint64_t addr)
{
	const char *name = NULL;

	kaddrs_names(k, &addr, 1, &name);
	return name;
}

/* trace_helpers.c's kallsyms and ftrace name lists (the attach ladder's lookups). */
static void check_ksyms(int kallsyms_readable)
{
	struct ksyms *ks = ksyms_load(), *ft;

	CHECK(ks || !kallsyms_readable, "ksyms_load");
	if (ks) {
		CHECK(ksyms_count(ks) > 1000 && ksyms_has(ks, "tcp_sendmsg") &&
		      !ksyms_has(ks, "tcp_sendmsg_no_such") && !ksyms_has(ks, "tcp_sendms"),
		      "kallsyms: %zu names", ksyms_count(ks));
		CHECK(ksyms_find_func(ks, "tcp_sendmsg") &&
		      !strcmp(ksyms_find_func(ks, "tcp_sendmsg"), "tcp_sendmsg") &&
		      !ksyms_find_func(ks, "tcp_sendmsg_no_such"), "ksyms_find_func");
	}
	ksyms_free(ks);
	ft = ftrace_funcs_load();	/* NULL where tracefs cannot be read: nothing to check */
	if (ft)
		CHECK(ksyms_count(ft) > 1000 && ksyms_has(ft, "tcp_sendmsg"),
		      "available_filter_functions: %zu names", ksyms_count(ft));
	ksyms_free(ft);
	ksyms_free(NULL);
}

static int first_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uint64_t *)data = info->dlpi_addr;
	return 1;
}

/* The address of one PLT stub of this executable (not PLT0), 0 when none is found. */
static uint64_t plt_stub_addr(void)
{
	int fd = open("/proc/self/exe", O_RDONLY);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	Elf_Scn *scn = NULL;
	uint64_t base = 0, addr = 0;
	size_t shstrndx;

	dl_iterate_phdr(first_object, &base);
	while (elf && !elf_getshdrstrndx(elf, &shstrndx) && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (!strcmp(name, ".plt.sec") && sh.sh_size >= 16)
			addr = base + sh.sh_addr;	/* IBT: the stubs, no PLT0 */
		else if (!strcmp(name, ".plt") && sh.sh_size >= 32 && !addr)
			addr = base + sh.sh_addr + 16;	/* the first stub after PLT0 */
	}
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return addr;
}

static const char CXX_SRC[] =
	"#include <cstdio>\n#include <unistd.h>\n"
	"namespace netio { struct Widget { int n; __attribute__((noinline)) int spin(int x); }; }\n"
	"int netio::Widget::spin(int x) { return n * x + 1; }\n"
	"int main() {\n"
	"  int (netio::Widget::*f)(int) = &netio::Widget::spin;\n"
	"  printf(\"%p\\n\", *(void **)&f); fflush(stdout); pause(); return 0; }\n";

/* A C++ program's member function, named after the program exited from the maps read while
 * it lived, comes out demangled; a second image of the same process keeps its own maps. */
static void check_cxx(struct frames *fr, const char *dir)
{
	char cmd[1024], path[512], line[64], buf[512];
	unsigned long long addr = 0;
	struct proc_maps *m, *other;
	enum sym_result r;
	int fds[2];
	pid_t pid;
	FILE *f;

	snprintf(path, sizeof(path), "%s/widget.cc", dir);
	f = fopen(path, "w");
	CHECK(f, "write %s", path);
	if (!f)
		return;
	fputs(CXX_SRC, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "g++ -O1 %s/widget.cc -o %s/widget", dir, dir);
	CHECK(system(cmd) == 0, "g++ builds the C++ program");
	snprintf(path, sizeof(path), "%s/widget", dir);
	if (pipe(fds))
		return;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (f && fgets(line, sizeof(line), f))
		addr = strtoull(line, NULL, 16);
	if (f)
		fclose(f);
	m = proc_maps_read(pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(m && addr, "C++ program: maps %p, address %llx", (void *)m, addr);
	if (!m)
		return;
	frames_set_image(fr, pid, 1, m);
	other = proc_maps_read(getpid());
	frames_set_image(fr, pid, 2, other); /* the same pid after an exec: another image */
	r = frames_user_name(fr, frames_image(fr, pid, 1), addr + 1, buf, sizeof(buf), NULL);
	CHECK(r == SYM_FUNC && !strcmp(buf, "netio::Widget::spin(int)"), "C++: %d %s", r, buf);
	printf("C++ member function: %s\n", buf);
	r = frames_user_name(fr, frames_image(fr, pid, 2), addr + 1, buf, sizeof(buf), NULL);
	CHECK(r != SYM_FUNC || strcmp(buf, "netio::Widget::spin(int)"), "other image: %s", buf);
	frames_forget_gone(fr);
	CHECK(!frames_image(fr, pid, 1) && !frames_image(fr, pid, 2), "gone process's images kept");
}

int main(int argc, char **argv)
{
	struct frames *s = frames_new();
	struct proc_maps *m;
	char buf[512];
	enum sym_result r;
	void *lib, *mc;
	int (*exported)(int);
	void *(*hidden)(void);
	const char *ks;
	uint64_t ka;

	struct kaddrs *k = kaddrs_new();

	CHECK(s && k, "frames_new, kaddrs_new");

	/* kernel */
	ka = kallsyms_addr("tcp_sendmsg");
	if (ka) {
		ks = kernel_name(k, ka + 4);
		CHECK(ks && !strcmp(ks, "tcp_sendmsg"), "kernel: %s", ks ? ks : "(null)");
		ks = kernel_name(k, ka);
		CHECK(ks && !strcmp(ks, "tcp_sendmsg"), "kernel start: %s", ks ? ks : "(null)");
	} else {
		fprintf(stderr, "skip kernel (kallsyms unreadable)\n");
	}
	CHECK(kernel_name(k, 16) == NULL, "kernel: address 16");
	check_ksyms(ka != 0);

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
	r = frames_user_name(s, m, (uint64_t)(uintptr_t)local_function + 2, buf, sizeof(buf), NULL);
	CHECK(r == SYM_FUNC && !strcmp(buf, "local_function"), "PIE: %d %s", r, buf);
	r = frames_user_name(s, m, (uint64_t)(uintptr_t)main, buf, sizeof(buf), NULL);
	CHECK(r == SYM_FUNC && !strcmp(buf, "main"), "main: %d %s", r, buf);

	/* libc's memcpy variant, named from the debug file (or at least .dynsym) */
	r = frames_user_name(s, m, (uint64_t)(uintptr_t)mc + 1, buf, sizeof(buf), NULL);
	CHECK(r == SYM_FUNC && strstr(buf, "mem"), "memcpy: %d %s", r, buf);
	printf("memcpy resolves to %s\n", buf);

	/* stripped library: exported through .dynsym, static function as [module] */
	if (exported && hidden) {
		r = frames_user_name(s, m, (uint64_t)(uintptr_t)exported, buf, sizeof(buf), NULL);
		CHECK(r == SYM_FUNC && !strcmp(buf, "exported_fn"), "stripped exported: %d %s", r,
		      buf);
		r = frames_user_name(s, m, (uint64_t)(uintptr_t)hidden(), buf, sizeof(buf), NULL);
		CHECK(r == SYM_MODULE && !strcmp(buf, "[libhidden.so]"), "stripped static: %d %s",
		      r, buf);
	}

	/* anonymous memory */
	{
		void *heap = malloc(64);

		r = frames_user_name(s, m, (uint64_t)(uintptr_t)heap, buf, sizeof(buf), NULL);
		CHECK(r == SYM_UNKNOWN && !strcmp(buf, "[unknown]"), "heap: %d %s", r, buf);
		free(heap);
		r = frames_user_name(s, NULL, (uint64_t)(uintptr_t)main, buf, sizeof(buf), NULL);
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
				r = frames_user_name(s, m, vdso + 0x600 + i, buf, sizeof(buf), NULL);
				named = r == SYM_FUNC;
			}
			CHECK(named, "vdso: no symbol in the vDSO text (%s)", buf);
			printf("vdso: %s\n", buf);
		}
	}

	/* return-address check and frame state */
	{
		uint64_t ret = (uint64_t)(uintptr_t)__builtin_return_address(0);

		CHECK(frames_is_return_address(s, m, ret), "return address into libc start");
		CHECK(!frames_is_return_address(s, m, (uint64_t)(uintptr_t)local_function),
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

	/* PLT stub: named after the GOT slot it jumps through */
	{
		uint64_t plt = plt_stub_addr();

		CHECK(plt, "no PLT stub found in the test binary");
		r = frames_user_name(s, m, plt + 4, buf, sizeof(buf), NULL);
		CHECK(r == SYM_FUNC && strstr(buf, "@plt"), "PLT: %d %s", r, buf);
		printf("PLT stub: %s\n", buf);
	}

	/* parse: a deleted file's module name */
	{
		static const char text[] =
			"7f0000000000-7f0000001000 r-xp 00000000 fd:01 12345     "
			"/nonexistent/libgone.so.1 (deleted)\n"
			"7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n";
		FILE *tf = fmemopen((void *)text, sizeof(text) - 1, "r");
		struct proc_maps *pm = tf ? proc_maps_parse(tf) : NULL;

		if (tf)
			fclose(tf);
		CHECK(pm, "parse a maps text");
		r = frames_user_name(s, pm, 0x7f0000000100, buf, sizeof(buf), NULL);
		CHECK(r == SYM_MODULE && !strcmp(buf, "[libgone.so.1]"), "deleted: %d %s", r, buf);
		r = frames_user_name(s, pm, 0x7f0000002100, buf, sizeof(buf), NULL);
		CHECK(r == SYM_UNKNOWN, "anon in parsed maps: %d %s", r, buf);
		proc_maps_free(pm);
	}

	if (have_dir)
		check_cxx(s, dir);
	proc_maps_free(m);
	frames_free(s);
	kaddrs_free(k);
	if (lib)
		dlclose(lib);
	if (have_dir) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return check_report("test_symbolize");
}
