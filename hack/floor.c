/* The floor for `run` + `delete` of /bin/true (issue 16): only the kernel work
 * every runtime must do, as `unshare -fmpuinC` would, with no shell in between.
 * Usage: rustpod-bench-floor ROOTFS MEMCG   (MEMCG: a memory cgroup dir that
 * does not exist yet; it is created, joined by the container, and removed).
 * Built static by hack/bench; exits with /bin/true's status. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what, const char *path)
{
	fprintf(stderr, "floor: %s %s: %s\n", what, path, strerror(errno));
	_exit(125);
}

/* Join the cgroup: "0" is the writing task itself. */
static void join(const char *cg)
{
	char procs[4096];
	snprintf(procs, sizeof procs, "%s/cgroup.procs", cg);
	int fd = open(procs, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		die("open", procs);
	if (write(fd, "0", 1) != 1)
		die("write", procs);
	close(fd);
}

/* The container's side: cgroup, cgroup namespace, private mounts, /proc, chroot, exec. */
static void child(const char *rootfs, const char *cg)
{
	char proc[4096];
	join(cg);
	if (unshare(CLONE_NEWCGROUP) < 0)
		die("unshare", "CLONE_NEWCGROUP");
	/* private first, so the proc mount does not reach the host's peer group */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("mount MS_REC|MS_PRIVATE", "/");
	snprintf(proc, sizeof proc, "%s/proc", rootfs);
	if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		die("mount proc", proc);
	if (chroot(rootfs) < 0)
		die("chroot", rootfs);
	if (chdir("/") < 0)
		die("chdir", "/");
	char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
	execve(argv[0], argv, envp);
	die("execve", argv[0]);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s ROOTFS MEMCG\n", argv[0]);
		return 2;
	}
	const char *rootfs = argv[1], *cg = argv[2];
	if (mkdir(cg, 0755) < 0)
		die("mkdir", cg);
	if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET) < 0)
		die("unshare", "CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWUTS|CLONE_NEWIPC|CLONE_NEWNET");
	pid_t pid = fork();
	if (pid < 0)
		die("fork", "");
	if (pid == 0)
		child(rootfs, cg);
	int st;
	if (waitpid(pid, &st, 0) < 0)
		die("waitpid", "");
	if (rmdir(cg) < 0)
		die("rmdir", cg);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
