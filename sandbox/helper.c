/*
 * exec-daemon-sandbox: runs one command confined by user/mount/net/pid namespaces, read-only bind
 * mounts, Landlock and seccomp. The daemon (sandbox/plan.py) decides *what* is allowed and passes
 * it on the command line; this program only applies it, fast (no interpreter start per command).
 *
 *   exec-daemon-sandbox [options] -- PROGRAM [ARG...]
 *   exec-daemon-sandbox --probe            prints what the kernel supports, as JSON
 *
 * Options (mount options are applied in the order given):
 *   --pin PATH            bind PATH onto itself (a mount point cannot be renamed or removed)
 *   --ro PATH             bind PATH read-only onto itself (PATH must exist)
 *   --ro-file PATH        like --ro, creating an empty placeholder file when PATH is missing
 *   --ro-dir PATH         like --ro, creating an empty placeholder directory when PATH is missing
 *   --rw-bind PATH        bind PATH read-write onto itself (an exception inside a read-only mount)
 *   --hide PATH           bind /dev/null over the regular file PATH (a secret: the daemon's token
 *                         file), so it reads empty and cannot be hard-linked; skipped when missing
 *   --mask PATH           mount an empty read-only tmpfs over the folder PATH: whatever is or
 *                         will be in it (the daemon's sockets) is out of reach, also a socket
 *                         bound there after the sandbox started; skipped when PATH is missing or
 *                         not a folder
 *   --mask-tmp PATH       like --mask, but an empty writable one with mode 1777 (/tmp/.X11-unix:
 *                         the sandbox may run its own X server, and sees nobody else's)
 *   --rw PATH             Landlock: PATH and everything beneath it is read-write
 *   --listed-reads        Landlock: only the --read paths and --read-fd files may be read (and
 *                         the --rw and --dev-rw ones); without it (and any --read, --read-fd)
 *                         everything may be read
 *   --read PATH           Landlock: PATH and everything beneath it may be read (and run)
 *   --read-fd N           Landlock: the file open on the kept descriptor N may be opened again
 *                         for reading (as /proc/self/fd/N: a helper's input); skipped when N is
 *                         not a regular file
 *   --dev-rw PATH         Landlock: a device file (or /dev/pts, /dev/shm) that may be written
 *   --net none|proxy|full none: no IP (or netlink, packet...) sockets at all; proxy: a private
 *                         network namespace whose only reachable TCP port is the daemon's proxy;
 *                         full: the host network
 *   --private-net         a private network namespace for `--net none` too. Without it, `none`
 *                         gets one only when Landlock cannot scope abstract unix sockets (ABI < 6):
 *                         with no IP sockets and scoped abstract sockets there is nothing a
 *                         network namespace would add, and creating one per command costs ~1 ms
 *   --proxy-port N        where the proxy listens inside the sandbox (default 3128)
 *   --ctl-fd N            SOCK_SEQPACKET socket to the daemon: "OK", "ERR <reason>", and "PROXY"
 *                         carrying the proxy's listening socket (SCM_RIGHTS)
 *   --keep-fd N           an extra descriptor the command inherits
 *   --cwd PATH            working directory of the command (default: the current one)
 *   --no-proc             keep the host's /proc instead of mounting one for the new PID namespace
 *   --max-processes N     RLIMIT_NPROC of the command: at most N processes and threads of the
 *                         sandbox at once (PID 1 included). The kernel counts them per user
 *                         namespace and uid (ucounts), so the daemon's other processes, running
 *                         as the same uid outside, do not count, and a fork bomb stops at N
 *
 * Placeholders are marked with the xattr user.exec-daemon.placeholder and shared-locked (flock)
 * while a sandbox uses them; the last sandbox to leave removes them if they are still empty.
 *
 * Process tree: this process stays in the daemon's namespaces (it waits, forwards signals sent to
 * it, removes placeholders, exits like the command did); its child is PID 1 of the new namespaces
 * (mounts, reaping, and killing everything left when the command ends); the grandchild drops all
 * capabilities, sets no_new_privs, Landlock and seccomp, then execs the command.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define SETUP_FAILED 125
#define EXEC_FAILED 127
#define PLACEHOLDER_XATTR "user.exec-daemon.placeholder"
#define MAX_OPS 256
#define MAX_FDS 16

/* ---- Landlock (defined here: the distribution headers may predate the ABI we use) ---------- */
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_REFER (1ULL << 13)    /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define LL_NET_BIND_TCP (1ULL << 0)  /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};
struct ll_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));
struct ll_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
};

#define LL_FS_READ (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
#define LL_FS_FILE_RIGHTS (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

/* ---- Options ------------------------------------------------------------------------------ */
enum op_kind { OP_PIN, OP_RO, OP_RO_FILE, OP_RO_DIR, OP_RW_BIND, OP_HIDE, OP_MASK, OP_MASK_TMP };
enum net_mode { NET_NONE, NET_PROXY, NET_FULL };

struct mount_op {
    enum op_kind kind;
    const char *path;
    int lock_fd;      /* placeholder lock, held by the outer process */
    int placeholder;  /* the path carries the placeholder mark */
};

struct options {
    struct mount_op ops[MAX_OPS];
    int n_ops;
    const char *rw[MAX_OPS];
    int n_rw;
    const char *read[MAX_OPS];
    int n_read;
    int read_fds[MAX_FDS];
    int n_read_fds;
    int listed_reads;
    const char *dev_rw[MAX_OPS];
    int n_dev_rw;
    enum net_mode net;
    int proxy_port;
    int ctl_fd;
    int keep_fds[MAX_FDS];
    int n_keep_fds;
    const char *cwd;
    int mount_proc;
    int private_net;
    long max_processes; /* 0: no limit of our own */
    char **argv;
};

static struct options opt = {.net = NET_NONE, .proxy_port = 3128, .ctl_fd = -1, .mount_proc = 1};

/* ---- Reporting ---------------------------------------------------------------------------- */
static void send_ctl(const char *text, int fd_to_pass) {
    if (opt.ctl_fd < 0) {
        if (strncmp(text, "ERR ", 4) == 0) dprintf(2, "exec-daemon-sandbox: %s\n", text + 4);
        return;
    }
    struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd_to_pass >= 0) {
        memset(&control, 0, sizeof control);
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cmsg), &fd_to_pass, sizeof(int));
    }
    while (sendmsg(opt.ctl_fd, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
}

/* Formats "ERR <what>: <strerror>" into buf. */
static void format_error(char *buf, size_t size, int err, const char *fmt, va_list args) {
    int n = snprintf(buf, size, "ERR ");
    n += vsnprintf(buf + n, size - (size_t)n, fmt, args);
    if (err && (size_t)n < size) snprintf(buf + n, size - (size_t)n, ": %s", strerror(err));
}

static void release_placeholders(void);
static void leave_pids_cgroup(void);
static pid_t outer_pid;

static __attribute__((noreturn, format(printf, 2, 3))) void fail(int err, const char *fmt, ...) {
    char buf[1024];
    va_list args;
    va_start(args, fmt);
    format_error(buf, sizeof buf, err, fmt, args);
    va_end(args);
    if (getpid() == outer_pid) {
        release_placeholders();
        leave_pids_cgroup();
    }
    send_ctl(buf, -1);
    _exit(SETUP_FAILED);
}

/* In the command's process, errors go through a close-on-exec pipe to PID 1 (which reports). */
static int payload_error_fd = -1;

static __attribute__((noreturn, format(printf, 3, 4))) void payload_fail(int code, int err, const char *fmt, ...) {
    char buf[1024];
    va_list args;
    va_start(args, fmt);
    format_error(buf, sizeof buf, err, fmt, args);
    va_end(args);
    if (payload_error_fd >= 0) {
        ssize_t ignored = write(payload_error_fd, buf, strlen(buf));
        (void)ignored;
    }
    _exit(code);
}

/* ---- Small utilities ---------------------------------------------------------------------- */
/* EXEC_DAEMON_SANDBOX_TIMING=1 prints how long each set-up step took (for scripts/bench_sandbox.py). */
static int timing_enabled;
static struct timespec timing_start;

static void timing_mark(const char *step) {
    if (!timing_enabled) return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - timing_start.tv_sec) * 1e3 + (double)(now.tv_nsec - timing_start.tv_nsec) / 1e6;
    dprintf(timing_enabled, "exec-daemon-sandbox timing %-22s %7.3f ms (pid %d)\n", step, ms, (int)getpid());
}

static int landlock_abi(void) {
    long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : (int)abi;
}

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    int err = errno;
    close(fd);
    errno = err;
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int parse_int(const char *text, const char *what) {
    char *end;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < 0 || value > 65535 * 16) fail(0, "bad %s: %s", what, text);
    return (int)value;
}

static int compare_ints(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Closes every descriptor >= 3 except `keep` (if >= 0) and the --keep-fd ones. */
static void close_other_fds(int keep) {
    int kept[MAX_FDS + 2];
    int n = 0;
    for (int i = 0; i < opt.n_keep_fds; i++) kept[n++] = opt.keep_fds[i];
    if (keep >= 0) kept[n++] = keep;
    if (timing_enabled) kept[n++] = timing_enabled;
    qsort(kept, (size_t)n, sizeof kept[0], compare_ints);
    unsigned int next = 3;
    for (int i = 0; i < n; i++) {
        if (kept[i] < (int)next) continue;
        if (kept[i] > (int)next) syscall(SYS_close_range, next, (unsigned int)kept[i] - 1, 0);
        next = (unsigned int)kept[i] + 1;
    }
    syscall(SYS_close_range, next, ~0U, 0);
}

static void redirect_std_to_null(void) {
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0) return;
    for (int fd = 0; fd < 3; fd++) dup2(null_fd, fd);
    if (null_fd > 2) close(null_fd);
}

/* ---- Placeholders (outer process, in the daemon's mount namespace) ------------------------ */

/* Opens the protected path, creating a marked placeholder when it is missing, and share-locks
 * placeholders so no other sandbox removes them while this one has them mounted. */
static void prepare_protected(struct mount_op *op) {
    int is_dir = op->kind == OP_RO_DIR;
    for (int attempt = 0; attempt < 8; attempt++) {
        int created = 0;
        int fd = open(op->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0 && errno == ENOENT) {
            if (is_dir) {
                if (mkdir(op->path, 0755) < 0 && errno != EEXIST) fail(errno, "create placeholder %s", op->path);
                fd = open(op->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                created = fd >= 0;
            } else {
                fd = open(op->path, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (fd < 0 && errno == EEXIST) continue;
                if (fd < 0) fail(errno, "create placeholder %s", op->path);
                created = 1;
            }
            if (created && fsetxattr(fd, PLACEHOLDER_XATTR, "1", 1, 0) < 0) created = 0;
        }
        if (fd < 0) {
            if (errno == ELOOP) fail(0, "protected path %s is a symbolic link", op->path);
            fail(errno, "open protected path %s", op->path);
        }
        char mark[4];
        int marked = created || fgetxattr(fd, PLACEHOLDER_XATTR, mark, sizeof mark) > 0;
        if (!marked) {
            close(fd);
            op->lock_fd = -1;
            op->placeholder = 0;
            return;
        }
        while (flock(fd, LOCK_SH) < 0 && errno == EINTR) {
        }
        /* The last user may have removed it between our open and our lock: start again. */
        struct stat by_fd, by_path;
        if (fstat(fd, &by_fd) == 0 && lstat(op->path, &by_path) == 0 && by_fd.st_dev == by_path.st_dev &&
            by_fd.st_ino == by_path.st_ino) {
            op->lock_fd = fd;
            op->placeholder = 1;
            return;
        }
        close(fd);
    }
    fail(0, "protected path %s keeps changing", op->path);
}

static int directory_is_empty(int fd) {
    int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup_fd < 0) return 0;
    char buf[4096];
    long n;
    int empty = 1;
    while (empty && (n = syscall(SYS_getdents64, dup_fd, buf, sizeof buf)) > 0) {
        for (long pos = 0; pos < n;) {
            struct {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *entry = (void *)(buf + pos);
            if (strcmp(entry->name, ".") != 0 && strcmp(entry->name, "..") != 0) empty = 0;
            pos += entry->reclen;
        }
    }
    close(dup_fd);
    return empty;
}

/* Removes the placeholders no other sandbox still uses (if they are still empty). */
static void release_placeholders(void) {
    for (int i = 0; i < opt.n_ops; i++) {
        struct mount_op *op = &opt.ops[i];
        if (!op->placeholder || op->lock_fd < 0) continue;
        if (flock(op->lock_fd, LOCK_EX | LOCK_NB) == 0) {
            struct stat by_fd, by_path;
            if (fstat(op->lock_fd, &by_fd) == 0 && lstat(op->path, &by_path) == 0 && by_fd.st_dev == by_path.st_dev &&
                by_fd.st_ino == by_path.st_ino) {
                if (S_ISDIR(by_fd.st_mode) && directory_is_empty(op->lock_fd))
                    rmdir(op->path);
                else if (S_ISREG(by_fd.st_mode) && by_fd.st_size == 0)
                    unlink(op->path);
            }
        }
        close(op->lock_fd);
        op->lock_fd = -1;
    }
}

/* ---- Unix sockets outside the sandbox ----------------------------------------------------- */
/* Landlock (ABI <= 7) does not control connect() to a pathname unix socket. So every socket bound
 * to a path when the sandbox starts (docker.sock, a tmux or ssh-agent socket in /tmp, ...) gets
 * /dev/null mounted over it inside the sandbox: connecting there is refused. The list comes from
 * /proc/net/unix of the daemon's network namespace, read before the sandbox has one of its own.
 * Abstract sockets are per network namespace and, from ABI 6, scoped by Landlock as well. */
#define MAX_OUTSIDE_SOCKETS 1024
#define MAX_RELATIVE_SOCKETS 64
static char *outside_sockets[MAX_OUTSIDE_SOCKETS];
static int n_outside_sockets;

static void add_outside_socket(const char *path) {
    for (int i = 0; i < n_outside_sockets; i++)
        if (strcmp(outside_sockets[i], path) == 0) return;
    if (n_outside_sockets < MAX_OUTSIDE_SOCKETS) outside_sockets[n_outside_sockets++] = strdup(path);
}

/* A socket bound by a relative path is listed by that path: it lies in the directory its server
 * was in. Found through the processes holding it (/proc/PID/fd -> socket:[inode]) and their
 * working directory; only when such sockets exist (a scan of /proc costs a few ms). */
struct relative_socket {
    unsigned long inode;
    char name[256];
};

static void locate_relative_sockets(const struct relative_socket *sockets, int count) {
    DIR *proc = opendir("/proc");
    if (!proc) return;
    struct dirent *process;
    while ((process = readdir(proc)) != NULL) {
        if (process->d_name[0] < '1' || process->d_name[0] > '9') continue;
        char fd_dir[64];
        snprintf(fd_dir, sizeof fd_dir, "/proc/%s/fd", process->d_name);
        DIR *fds = opendir(fd_dir);
        if (!fds) continue; /* another user's process, or gone */
        struct dirent *fd;
        while ((fd = readdir(fds)) != NULL) {
            char link[96], target[64];
            snprintf(link, sizeof link, "%s/%s", fd_dir, fd->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n <= 8 || strncmp(target, "socket:[", 8) != 0) continue;
            target[n] = '\0';
            unsigned long inode = strtoul(target + 8, NULL, 10);
            for (int i = 0; i < count; i++) {
                if (sockets[i].inode != inode) continue;
                char cwd_link[64], cwd[4096], path[4096 + 258];
                snprintf(cwd_link, sizeof cwd_link, "/proc/%s/cwd", process->d_name);
                ssize_t length = readlink(cwd_link, cwd, sizeof cwd - 1);
                if (length <= 0) continue;
                cwd[length] = '\0';
                snprintf(path, sizeof path, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, sockets[i].name);
                add_outside_socket(path);
            }
        }
        closedir(fds);
    }
    closedir(proc);
}

static void collect_outside_sockets(void) {
    FILE *table = fopen("/proc/self/net/unix", "re");
    if (!table) return;
    static struct relative_socket relative[MAX_RELATIVE_SOCKETS];
    int n_relative = 0;
    char line[4352];
    if (!fgets(line, sizeof line, table)) line[0] = '\0'; /* header */
    while (n_outside_sockets < MAX_OUTSIDE_SOCKETS && fgets(line, sizeof line, table)) {
        /* Num RefCount Protocol Flags Type St Inode Path */
        char *cursor = line, *inode_field = NULL;
        for (int field = 0; field < 7 && *cursor; field++) {
            while (*cursor == ' ') cursor++;
            if (field == 6) inode_field = cursor;
            while (*cursor && *cursor != ' ' && *cursor != '\n') cursor++;
        }
        while (*cursor == ' ') cursor++;
        cursor[strcspn(cursor, "\n")] = '\0';
        /* Abstract names start with '@'; unnamed sockets have none. */
        if (*cursor == '\0' || *cursor == '@') continue;
        if (*cursor == '/') {
            add_outside_socket(cursor);
        } else if (n_relative < MAX_RELATIVE_SOCKETS && inode_field && strlen(cursor) < sizeof relative[0].name) {
            relative[n_relative].inode = strtoul(inode_field, NULL, 10);
            snprintf(relative[n_relative].name, sizeof relative[0].name, "%s", cursor);
            n_relative++;
        }
    }
    fclose(table);
    if (n_relative) locate_relative_sockets(relative, n_relative);
}

static void mask_outside_sockets(void) {
    for (int i = 0; i < n_outside_sockets; i++) {
        struct stat st;
        if (!outside_sockets[i] || lstat(outside_sockets[i], &st) < 0 || !S_ISSOCK(st.st_mode)) continue;
        /* A socket removed since it was listed (its server ended) needs no hiding. */
        if (mount("/dev/null", outside_sockets[i], NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
            fail(errno, "hide the unix socket %s", outside_sockets[i]);
    }
}

/* ---- Namespace set-up (PID 1) ------------------------------------------------------------- */
static unsigned long locked_mount_flags(const char *path) {
    struct statvfs info;
    if (statvfs(path, &info) < 0) return 0;
    unsigned long flags = 0;
    if (info.f_flag & ST_NOSUID) flags |= MS_NOSUID;
    if (info.f_flag & ST_NODEV) flags |= MS_NODEV;
    if (info.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (info.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (info.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (info.f_flag & ST_RELATIME) flags |= MS_RELATIME;
    return flags;
}

static void bind_onto_itself(const char *path, int read_only) {
    struct stat st;
    if (lstat(path, &st) < 0) fail(errno, "mount %s", path);
    if (S_ISLNK(st.st_mode)) fail(0, "cannot mount over %s: it is a symbolic link", path);
    if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0) fail(errno, "bind mount %s", path);
    unsigned long flags = MS_REMOUNT | MS_BIND | locked_mount_flags(path) | (read_only ? MS_RDONLY : 0);
    if (mount(NULL, path, NULL, flags, NULL) < 0) fail(errno, "remount %s %s", path, read_only ? "read-only" : "read-write");
}

static void apply_mounts(void) {
    for (int i = 0; i < opt.n_ops; i++) {
        struct mount_op *op = &opt.ops[i];
        switch (op->kind) {
        case OP_PIN:
            if (mount(op->path, op->path, NULL, MS_BIND | MS_REC, NULL) < 0) fail(errno, "bind mount %s", op->path);
            break;
        case OP_RO:
        case OP_RO_FILE:
        case OP_RO_DIR:
            bind_onto_itself(op->path, 1);
            break;
        case OP_RW_BIND:
            bind_onto_itself(op->path, 0);
            break;
        case OP_HIDE: {
            struct stat st;
            if (lstat(op->path, &st) < 0 || !S_ISREG(st.st_mode)) break;
            if (mount("/dev/null", op->path, NULL, MS_BIND, NULL) < 0) fail(errno, "hide %s", op->path);
            break;
        }
        case OP_MASK:
        case OP_MASK_TMP: {
            struct stat st;
            /* Missing or unreachable for this user: nothing to reach there either. */
            if (lstat(op->path, &st) < 0 || !S_ISDIR(st.st_mode)) break;
            int writable = op->kind == OP_MASK_TMP;
            unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | (writable ? 0 : MS_RDONLY);
            if (mount("tmpfs", op->path, "tmpfs", flags,
                      writable ? "mode=1777,size=1m,nr_inodes=1024" : "mode=0555,size=4k,nr_inodes=2") < 0)
                fail(errno, "mask %s", op->path);
            break;
        }
        }
    }
}

static void write_id_maps(uid_t uid, gid_t gid) {
    char map[64];
    if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT) fail(errno, "write setgroups");
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
    if (write_file("/proc/self/uid_map", map) < 0) fail(errno, "write uid_map");
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
    if (write_file("/proc/self/gid_map", map) < 0) fail(errno, "write gid_map");
}

static int bring_loopback_up(void) {
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0) return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    int rc = ioctl(sock, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(sock, SIOCSIFFLAGS, &ifr);
    }
    int err = errno;
    close(sock);
    errno = err;
    return rc;
}

/* The proxy's listening socket lives in the sandbox's network namespace; the daemon accepts on it. */
static void hand_proxy_listener_to_daemon(void) {
    int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0) fail(errno, "proxy socket");
    int one = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.proxy_port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(sock, (struct sockaddr *)&addr, sizeof addr) < 0) fail(errno, "bind proxy port %d", opt.proxy_port);
    if (listen(sock, 128) < 0) fail(errno, "listen on proxy port");
    if (opt.ctl_fd < 0) fail(0, "--net proxy needs --ctl-fd");
    send_ctl("PROXY", sock);
    close(sock);
}

/* ---- Confinement of the command ----------------------------------------------------------- */
static void drop_capabilities(void) {
    if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                     SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                     SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) < 0)
        payload_fail(SETUP_FAILED, errno, "set securebits");
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            payload_fail(SETUP_FAILED, errno, "drop capability %d", cap);
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) < 0) payload_fail(SETUP_FAILED, errno, "clear capabilities");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) payload_fail(SETUP_FAILED, errno, "set no_new_privs");
}

static uint64_t fs_rights_for_abi(int abi) {
    uint64_t rights = LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_REMOVE_DIR |
                      LL_FS_REMOVE_FILE | LL_FS_MAKE_CHAR | LL_FS_MAKE_DIR | LL_FS_MAKE_REG | LL_FS_MAKE_SOCK |
                      LL_FS_MAKE_FIFO | LL_FS_MAKE_BLOCK | LL_FS_MAKE_SYM;
    if (abi >= 2) rights |= LL_FS_REFER;
    if (abi >= 3) rights |= LL_FS_TRUNCATE;
    if (abi >= 5) rights |= LL_FS_IOCTL_DEV;
    return rights;
}

/* Grants `rights` on the file or hierarchy open on `fd` (`what` names it in errors). */
static void landlock_allow_fd(int ruleset, int fd, uint64_t rights, uint64_t handled, const char *what) {
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= LL_FS_FILE_RIGHTS;
    struct ll_path_beneath_attr rule = {.allowed_access = rights & handled, .parent_fd = fd};
    if (syscall(__NR_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0) < 0)
        payload_fail(SETUP_FAILED, errno, "landlock: rule for %s", what);
}

/* Grants `rights` on the hierarchy at `path`; missing paths are skipped (nothing to grant). */
static void landlock_allow_path(int ruleset, const char *path, uint64_t rights, uint64_t handled) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == EACCES) return;
        payload_fail(SETUP_FAILED, errno, "landlock: open %s", path);
    }
    landlock_allow_fd(ruleset, fd, rights, handled, path);
    close(fd);
}

/* Reads: everywhere, or only the --read paths and the files of the --read-fd descriptors. */
static void landlock_allow_reads(int ruleset, uint64_t handled) {
    if (!opt.listed_reads) {
        landlock_allow_path(ruleset, "/", LL_FS_READ, handled);
        return;
    }
    for (int i = 0; i < opt.n_read; i++) landlock_allow_path(ruleset, opt.read[i], LL_FS_READ, handled);
    for (int i = 0; i < opt.n_read_fds; i++) {
        struct stat st;
        if (fstat(opt.read_fds[i], &st) < 0 || !S_ISREG(st.st_mode)) continue;
        char what[32];
        snprintf(what, sizeof what, "descriptor %d", opt.read_fds[i]);
        landlock_allow_fd(ruleset, opt.read_fds[i], LL_FS_READ_FILE, handled, what);
    }
}

static void apply_landlock(int abi) {
    uint64_t handled = fs_rights_for_abi(abi);
    struct ll_ruleset_attr attr = {.handled_access_fs = handled};
    if (abi >= 4 && opt.net != NET_FULL) attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
    if (abi >= 6) attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
    int ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0) payload_fail(SETUP_FAILED, errno, "landlock: create ruleset");

    uint64_t read_write = handled & ~(LL_FS_MAKE_CHAR | LL_FS_MAKE_BLOCK);
    landlock_allow_reads(ruleset, handled);
    for (int i = 0; i < opt.n_rw; i++) landlock_allow_path(ruleset, opt.rw[i], read_write, handled);
    uint64_t device_rights = LL_FS_READ | LL_FS_WRITE_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
    for (int i = 0; i < opt.n_dev_rw; i++) {
        struct stat st;
        int is_dir = stat(opt.dev_rw[i], &st) == 0 && S_ISDIR(st.st_mode);
        /* /dev/shm is a temp directory; /dev/pts holds terminals (no creating there). */
        uint64_t rights = is_dir && strcmp(opt.dev_rw[i], "/dev/shm") == 0 ? read_write : device_rights;
        landlock_allow_path(ruleset, opt.dev_rw[i], rights, handled);
    }
    if (opt.net == NET_PROXY && abi >= 4) {
        struct ll_net_port_attr rule = {.allowed_access = LL_NET_CONNECT_TCP, .port = (uint64_t)opt.proxy_port};
        if (syscall(__NR_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &rule, 0) < 0)
            payload_fail(SETUP_FAILED, errno, "landlock: proxy port rule");
    }
    if (syscall(__NR_landlock_restrict_self, ruleset, 0) < 0) payload_fail(SETUP_FAILED, errno, "landlock: restrict");
    close(ruleset);
}

static void seccomp_deny(scmp_filter_ctx ctx, const char *name, int err) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr < 0) return; /* not a syscall on this architecture */
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0) < 0) payload_fail(SETUP_FAILED, 0, "seccomp: rule %s", name);
}

/* socket()/socketpair() fail with EAFNOSUPPORT for every address family not in `allowed`
 * (ascending). Few rules: one per refused family below the largest allowed, one for the rest. */
static int seccomp_restrict_families(scmp_filter_ctx ctx, int syscall_nr, const int *allowed, int n_allowed) {
    int largest = allowed[n_allowed - 1];
    for (int family = 0, next = 0; family < largest; family++) {
        if (next < n_allowed && allowed[next] == family) {
            next++;
            continue;
        }
        if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), syscall_nr, 1,
                             SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)family)) < 0)
            return -1;
    }
    return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), syscall_nr, 1,
                            SCMP_A0(SCMP_CMP_GT, (scmp_datum_t)largest));
}

static scmp_filter_ctx build_seccomp(enum net_mode net) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) return NULL;
    static const char *const denied[] = {
        "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
        "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
        "fsmount", "fspick", "mount_setattr", "unshare", "setns",
        "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "perf_event_open", "userfaultfd",
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
        "add_key", "request_key", "keyctl", "acct", "swapon", "swapoff", "reboot", "syslog",
        "quotactl", "quotactl_fd", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
        "iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "vhangup",
        "fanotify_init", "nfsservctl",
    };
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) seccomp_deny(ctx, denied[i], EPERM);
    /* clone3's flags are behind a pointer seccomp cannot read: ENOSYS makes libc fall back to clone. */
    seccomp_deny(ctx, "clone3", ENOSYS);
    static const unsigned long namespace_flags[] = {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                                    CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET};
    for (size_t i = 0; i < sizeof namespace_flags / sizeof namespace_flags[0]; i++)
        if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, namespace_flags[i], namespace_flags[i])) < 0)
            return NULL;
    /* Pushing characters into a terminal's input would type commands outside the sandbox. */
    static const unsigned long tty_injection[] = {TIOCSTI, TIOCLINUX};
    for (size_t i = 0; i < 2; i++)
        if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, tty_injection[i])) < 0)
            return NULL;

    static const int unix_only[] = {AF_UNIX};
    static const int unix_and_ip[] = {AF_UNIX, AF_INET, AF_INET6};
    static const int full[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
    const int *families = net == NET_FULL ? full : net == NET_PROXY ? unix_and_ip : unix_only;
    int n_families = net == NET_FULL ? 4 : net == NET_PROXY ? 3 : 1;
    if (seccomp_restrict_families(ctx, SCMP_SYS(socket), families, n_families) < 0 ||
        seccomp_restrict_families(ctx, SCMP_SYS(socketpair), unix_only, 1) < 0)
        return NULL;
    if (net == NET_PROXY) {
        /* Through the proxy only TCP makes sense: no UDP, no raw sockets. */
        static const int ip[] = {AF_INET, AF_INET6};
        static const int other_types[] = {SOCK_DGRAM, SOCK_RAW, SOCK_RDM, SOCK_SEQPACKET, SOCK_DCCP, SOCK_PACKET};
        for (int f = 0; f < 2; f++)
            for (size_t t = 0; t < sizeof other_types / sizeof other_types[0]; t++)
                if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 2,
                                     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)ip[f]),
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)other_types[t])) < 0)
                    return NULL;
    }
    return ctx;
}

static void apply_seccomp(void) {
    scmp_filter_ctx ctx = build_seccomp(opt.net);
    if (!ctx) payload_fail(SETUP_FAILED, 0, "seccomp: build filter");
    int rc = seccomp_load(ctx);
    if (rc < 0) payload_fail(SETUP_FAILED, -rc, "seccomp: load filter");
    seccomp_release(ctx);
}

static void reset_signals(void) {
    for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* ---- Process limit ------------------------------------------------------------------------ */
/* For root, RLIMIT_NPROC is no limit: the kernel exempts the global root user whatever its user
 * namespace. So a root helper puts itself, before creating the namespaces (everything after
 * inherits it), into a pids cgroup of its own with pids.max, and leaves and removes it at the end.
 * The cgroup v1 pids hierarchy is used (this machine's); where there is none, the daemon knows it
 * from --probe and passes no --max-processes (the effective policy says the limit is not held). */
#define PIDS_ROOT "/sys/fs/cgroup/pids"
static char pids_cgroup[256];
static char pids_parent[256];

/* The cgroups of helpers that were killed (SIGKILL leaves no chance to remove one): removed once
 * their helper is gone (rmdir only removes an empty cgroup). */
static void remove_orphaned_pids_cgroups(void) {
    DIR *parent = opendir(pids_parent);
    if (!parent) return;
    struct dirent *entry;
    const char prefix[] = "exec-daemon-sandbox-";
    while ((entry = readdir(parent)) != NULL) {
        if (strncmp(entry->d_name, prefix, sizeof prefix - 1) != 0) continue;
        pid_t owner = (pid_t)atoi(entry->d_name + sizeof prefix - 1);
        if (owner <= 0 || kill(owner, 0) == 0 || errno != ESRCH) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", pids_parent, entry->d_name);
        rmdir(path);
    }
    closedir(parent);
}

/* The pids cgroup this process is in (where the sandbox's own goes). */
static void find_pids_parent(void) {
    char own[256] = "/";
    FILE *self = fopen("/proc/self/cgroup", "re");
    if (self) {
        char line[512];
        while (fgets(line, sizeof line, self)) {
            char *controllers = strchr(line, ':');
            char *path = controllers ? strchr(controllers + 1, ':') : NULL;
            if (!path || strncmp(controllers, ":pids:", 6) != 0) continue;
            path[1 + strcspn(path + 1, "\n")] = '\0';
            snprintf(own, sizeof own, "%s", path + 1);
        }
        fclose(self);
    }
    snprintf(pids_parent, sizeof pids_parent, PIDS_ROOT "%s", strcmp(own, "/") == 0 ? "" : own);
}

/* How the sandbox's process count is bounded here (reported by --probe). */
static const char *process_limit_kind(void) {
    if (geteuid() != 0) return "rlimit";
    find_pids_parent();
    return access(pids_parent, W_OK) == 0 ? "pids_cgroup" : "none";
}

static void enter_pids_cgroup(void) {
    if (opt.max_processes <= 0 || geteuid() != 0) return;
    find_pids_parent();
    remove_orphaned_pids_cgroups();
    snprintf(pids_cgroup, sizeof pids_cgroup, "%s/exec-daemon-sandbox-%d", pids_parent, (int)getpid());
    if (mkdir(pids_cgroup, 0700) < 0 && errno != EEXIST) {
        int err = errno;
        pids_cgroup[0] = '\0';
        fail(err, "cannot limit the sandbox's processes (root ignores RLIMIT_NPROC; no pids cgroup at " PIDS_ROOT ")");
    }
    char path[320], number[32];
    snprintf(number, sizeof number, "%ld", opt.max_processes + 1); /* + this process */
    snprintf(path, sizeof path, "%s/pids.max", pids_cgroup);
    if (write_file(path, number) < 0) fail(errno, "write %s", path);
    snprintf(number, sizeof number, "%d", (int)getpid());
    snprintf(path, sizeof path, "%s/cgroup.procs", pids_cgroup);
    if (write_file(path, number) < 0) fail(errno, "enter the pids cgroup %s", pids_cgroup);
}

static void leave_pids_cgroup(void) {
    if (!pids_cgroup[0]) return;
    char path[320], number[32];
    snprintf(number, sizeof number, "%d", (int)getpid());
    snprintf(path, sizeof path, "%s/cgroup.procs", pids_parent);
    write_file(path, number);
    rmdir(pids_cgroup);
    pids_cgroup[0] = '\0';
}

/* RLIMIT_NPROC counts the tasks of the caller's uid in its user namespace (and checks each
 * ancestor namespace's count against that one's limit): in the sandbox's own user namespace it
 * counts the sandbox's processes only. Without CAP_SYS_RESOURCE/CAP_SYS_ADMIN in the initial
 * namespace (dropped above) nothing exempts the command from it, root inside included. */
static void limit_processes(void) {
    if (opt.max_processes <= 0) return;
    struct rlimit limit;
    if (getrlimit(RLIMIT_NPROC, &limit) < 0) payload_fail(SETUP_FAILED, errno, "getrlimit nproc");
    rlim_t wanted = (rlim_t)opt.max_processes;
    if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max > wanted) limit.rlim_max = wanted;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > limit.rlim_max) limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NPROC, &limit) < 0) payload_fail(SETUP_FAILED, errno, "setrlimit nproc");
}

static __attribute__((noreturn)) void run_payload(int error_fd) {
    payload_error_fd = error_fd;
    timing_mark("payload: forked");
    reset_signals();
    close_other_fds(error_fd);
    /* After the mounts: a working directory taken before them would bypass the read-only binds. */
    if (chdir(opt.cwd) < 0) payload_fail(SETUP_FAILED, errno, "chdir %s", opt.cwd);
    int abi = landlock_abi();
    if (abi < 1) payload_fail(SETUP_FAILED, 0, "landlock is not available");
    timing_mark("payload: landlock abi");
    drop_capabilities();
    timing_mark("payload: capabilities");
    apply_landlock(abi);
    timing_mark("payload: landlock");
    apply_seccomp();
    timing_mark("payload: seccomp");
    limit_processes();
    execvp(opt.argv[0], opt.argv);
    payload_fail(EXEC_FAILED, errno, "exec %s", opt.argv[0]);
}

/* ---- Signals ------------------------------------------------------------------------------ */
/* Signals sent to this process (kill, pidfd_send_signal: SI_USER) reach the command through PID 1.
 * Those the kernel sends a whole process group (a terminal's Ctrl-C, SI_KERNEL) reach the command
 * directly, so they are not forwarded (it would get them twice); neither ends the helper. */
static const int forwarded_signals[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2};

static int is_forwarded(int sig, const siginfo_t *info) {
    if (info->si_code != SI_USER && info->si_code != SI_QUEUE && info->si_code != SI_TKILL) return 0;
    for (size_t i = 0; i < sizeof forwarded_signals / sizeof forwarded_signals[0]; i++)
        if (forwarded_signals[i] == sig) return 1;
    return 0;
}

/* ---- PID 1 of the sandbox ----------------------------------------------------------------- */
static __attribute__((noreturn)) void run_init(uid_t uid, gid_t gid, int parent_alive_fd, int status_fd) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct pollfd alive = {.fd = parent_alive_fd, .events = POLLIN};
    if (poll(&alive, 1, 0) > 0) _exit(SETUP_FAILED); /* the outer process is already gone */

    timing_mark("init: started");
    write_id_maps(uid, gid);
    timing_mark("init: id maps");
    apply_mounts();
    mask_outside_sockets();
    timing_mark("init: mounts");
    if (opt.private_net && bring_loopback_up() < 0) fail(errno, "bring up loopback");
    if (opt.net == NET_PROXY) hand_proxy_listener_to_daemon();
    timing_mark("init: network");
    if (opt.mount_proc && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        fail(errno, "mount /proc for the PID namespace");
    timing_mark("init: /proc");

    int error_pipe[2];
    if (pipe2(error_pipe, O_CLOEXEC) < 0) fail(errno, "pipe");
    sigset_t all, previous;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &previous);
    pid_t payload = fork();
    if (payload < 0) fail(errno, "fork");
    if (payload == 0) {
        close(error_pipe[0]);
        run_payload(error_pipe[1]);
    }
    close(error_pipe[1]);
    char message[1024];
    ssize_t n;
    while ((n = read(error_pipe[0], message, sizeof message - 1)) < 0 && errno == EINTR) {
    }
    close(error_pipe[0]);
    int payload_status = 0;
    if (n > 0) {
        message[n] = '\0';
        send_ctl(message, -1);
        waitpid(payload, &payload_status, 0);
        _exit(WIFEXITED(payload_status) ? WEXITSTATUS(payload_status) : SETUP_FAILED);
    }
    timing_mark("init: command started");
    send_ctl("OK", -1);
    if (opt.ctl_fd >= 0) close(opt.ctl_fd);
    redirect_std_to_null();

    /* Reap everything; when the command ends, end whatever it left behind (setsid or not). */
    int payload_done = 0;
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&all, &info);
        if (is_forwarded(sig, &info)) {
            if (!payload_done) kill(payload, sig);
            continue;
        }
        if (sig != SIGCHLD) continue;
        for (;;) {
            int status;
            pid_t pid = waitpid(-1, &status, WNOHANG);
            if (pid < 0 && errno == ECHILD) {
                if (!payload_done) _exit(SETUP_FAILED);
                timing_mark("init: all reaped");
                ssize_t ignored = write(status_fd, &payload_status, sizeof payload_status);
                (void)ignored;
                _exit(0);
            }
            if (pid <= 0) break;
            if (pid == payload) {
                timing_mark("init: command ended");
                payload_done = 1;
                payload_status = status;
                kill(-1, SIGKILL);
            }
        }
    }
}

/* ---- The outer process -------------------------------------------------------------------- */
static volatile sig_atomic_t init_pid;

static void forward_signal(int sig, siginfo_t *info, void *context) {
    (void)context;
    if (init_pid > 0 && is_forwarded(sig, info)) kill(init_pid, sig);
}

static __attribute__((noreturn)) void exit_like(int status) {
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        kill(getpid(), sig);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : SETUP_FAILED);
}

static int run_sandbox(void) {
    outer_pid = getpid();
    signal(SIGCHLD, SIG_DFL);
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (!opt.cwd) {
        static char cwd[4096];
        if (!getcwd(cwd, sizeof cwd)) fail(errno, "getcwd");
        opt.cwd = cwd;
    }
    timing_mark("outer: started");
    if (landlock_abi() < 1) fail(0, "landlock is not available");
    timing_mark("outer: landlock abi");
    for (int i = 0; i < opt.n_ops; i++)
        if (opt.ops[i].kind == OP_RO_FILE || opt.ops[i].kind == OP_RO_DIR) prepare_protected(&opt.ops[i]);
    timing_mark("outer: placeholders");

    int alive[2], status_pipe[2];
    if (pipe2(alive, O_CLOEXEC) < 0 || pipe2(status_pipe, O_CLOEXEC) < 0) fail(errno, "pipe");
    /* Group signals (Ctrl-C, killpg) reach the command directly; this process must outlive them. */
    static const int ignored[] = {SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGWINCH};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) signal(ignored[i], SIG_IGN);
    struct sigaction forward = {.sa_sigaction = forward_signal, .sa_flags = SA_RESTART | SA_SIGINFO};
    sigemptyset(&forward.sa_mask);
    for (size_t i = 0; i < sizeof forwarded_signals / sizeof forwarded_signals[0]; i++)
        sigaction(forwarded_signals[i], &forward, NULL);

    unsigned long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | SIGCHLD;
    if (opt.net == NET_PROXY || (opt.net == NET_NONE && landlock_abi() < 6)) opt.private_net = 1;
    if (opt.net == NET_FULL) opt.private_net = 0;
    if (opt.private_net) flags |= CLONE_NEWNET;
    collect_outside_sockets();
    timing_mark("outer: sockets");
    enter_pids_cgroup();
    timing_mark("outer: pids cgroup");
    pid_t pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
    if (pid < 0) fail(errno, "create namespaces");
    if (pid == 0) {
        close(alive[1]);
        close(status_pipe[0]);
        for (int i = 0; i < opt.n_ops; i++)
            if (opt.ops[i].lock_fd >= 0) close(opt.ops[i].lock_fd);
        run_init(uid, gid, alive[0], status_pipe[1]);
    }
    init_pid = pid;
    close(alive[0]);
    close(status_pipe[1]);
    if (opt.ctl_fd >= 0) redirect_std_to_null();

    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) fail(errno, "wait");
    timing_mark("outer: sandbox ended");
    int payload_status;
    ssize_t n = read(status_pipe[0], &payload_status, sizeof payload_status);
    release_placeholders();
    timing_mark("outer: placeholders freed");
    leave_pids_cgroup();
    exit_like(n == (ssize_t)sizeof payload_status ? payload_status : status);
}

/* ---- Probe -------------------------------------------------------------------------------- */
enum { PROBE_MAPS = 1, PROBE_MOUNT = 2, PROBE_LOOPBACK = 4, PROBE_PROC = 8 };

static int probe_namespaces(char *error, size_t size) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) < 0) return 0;
    uid_t uid = geteuid();
    gid_t gid = getegid();
    pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | SIGCHLD,
                               NULL, NULL, NULL, NULL);
    if (pid < 0) {
        snprintf(error, size, "cannot create user/mount/pid/net namespaces: %s", strerror(errno));
        close(report[0]);
        close(report[1]);
        return 0;
    }
    if (pid == 0) {
        close(report[0]);
        opt.ctl_fd = -1;
        int result = 0;
        char map[64];
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        int maps_ok = (write_file("/proc/self/setgroups", "deny") == 0 || errno == ENOENT) &&
                      write_file("/proc/self/uid_map", map) == 0;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        maps_ok = maps_ok && write_file("/proc/self/gid_map", map) == 0;
        if (maps_ok) result |= PROBE_MAPS;
        if (mount("/", "/", NULL, MS_BIND | MS_REC, NULL) == 0 &&
            mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | locked_mount_flags("/"), NULL) == 0)
            result |= PROBE_MOUNT;
        if (bring_loopback_up() == 0) result |= PROBE_LOOPBACK;
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0) result |= PROBE_PROC;
        ssize_t ignored = write(report[1], &result, sizeof result);
        (void)ignored;
        _exit(0);
    }
    close(report[1]);
    int result = 0;
    if (read(report[0], &result, sizeof result) != (ssize_t)sizeof result) result = 0;
    close(report[0]);
    waitpid(pid, NULL, 0);
    if (!(result & PROBE_MAPS)) snprintf(error, size, "cannot map the user id in a user namespace");
    else if (!(result & PROBE_MOUNT)) snprintf(error, size, "cannot bind-mount in a user namespace");
    else if (!(result & PROBE_LOOPBACK)) snprintf(error, size, "cannot bring up loopback in a network namespace");
    return result;
}

static int probe_seccomp(char *error, size_t size) {
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        scmp_filter_ctx ctx = build_seccomp(NET_NONE);
        _exit(ctx && seccomp_load(ctx) == 0 ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) snprintf(error, size, "cannot load a seccomp filter");
    return ok;
}

static int probe(void) {
    char ns_error[256] = "", seccomp_error[256] = "";
    int ns = probe_namespaces(ns_error, sizeof ns_error);
    int seccomp_ok = probe_seccomp(seccomp_error, sizeof seccomp_error);
    int namespaces_ok = (ns & (PROBE_MAPS | PROBE_MOUNT | PROBE_LOOPBACK)) == (PROBE_MAPS | PROBE_MOUNT | PROBE_LOOPBACK);
    printf("{\"landlock_abi\": %d, \"namespaces\": %s, \"namespaces_error\": \"%s\", \"proc_mount\": %s, "
           "\"seccomp\": %s, \"seccomp_error\": \"%s\", \"process_limit\": \"%s\"}\n",
           landlock_abi(), namespaces_ok ? "true" : "false", ns_error, (ns & PROBE_PROC) ? "true" : "false",
           seccomp_ok ? "true" : "false", seccomp_error, process_limit_kind());
    return 0;
}

/* ---- main --------------------------------------------------------------------------------- */
static void add_op(enum op_kind kind, const char *path) {
    if (opt.n_ops == MAX_OPS) fail(0, "too many mount options");
    if (path[0] != '/') fail(0, "mount paths must be absolute: %s", path);
    opt.ops[opt.n_ops++] = (struct mount_op){.kind = kind, .path = path, .lock_fd = -1};
}

int main(int argc, char **argv) {
    int i = 1;
    if (argc == 2 && strcmp(argv[1], "--probe") == 0) return probe();
    if (getenv("EXEC_DAEMON_SANDBOX_TIMING")) {
        timing_enabled = fcntl(2, F_DUPFD_CLOEXEC, 100);
        if (timing_enabled < 0) timing_enabled = 0;
        clock_gettime(CLOCK_MONOTONIC, &timing_start);
    }
    /* --ctl-fd first, so that argument errors are reported on it too. */
    for (int j = 1; j + 1 < argc && strcmp(argv[j], "--") != 0; j++)
        if (strcmp(argv[j], "--ctl-fd") == 0) opt.ctl_fd = atoi(argv[j + 1]);
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(arg, "--no-proc") == 0) {
            opt.mount_proc = 0;
            continue;
        }
        if (strcmp(arg, "--private-net") == 0) {
            opt.private_net = 1;
            continue;
        }
        if (strcmp(arg, "--listed-reads") == 0) {
            opt.listed_reads = 1;
            continue;
        }
        if (i + 1 >= argc) fail(0, "option %s needs a value", arg);
        const char *value = argv[++i];
        if (strcmp(arg, "--pin") == 0) add_op(OP_PIN, value);
        else if (strcmp(arg, "--ro") == 0) add_op(OP_RO, value);
        else if (strcmp(arg, "--ro-file") == 0) add_op(OP_RO_FILE, value);
        else if (strcmp(arg, "--ro-dir") == 0) add_op(OP_RO_DIR, value);
        else if (strcmp(arg, "--rw-bind") == 0) add_op(OP_RW_BIND, value);
        else if (strcmp(arg, "--hide") == 0) add_op(OP_HIDE, value);
        else if (strcmp(arg, "--mask") == 0) add_op(OP_MASK, value);
        else if (strcmp(arg, "--mask-tmp") == 0) add_op(OP_MASK_TMP, value);
        else if (strcmp(arg, "--rw") == 0 && opt.n_rw < MAX_OPS) opt.rw[opt.n_rw++] = value;
        else if (strcmp(arg, "--dev-rw") == 0 && opt.n_dev_rw < MAX_OPS) opt.dev_rw[opt.n_dev_rw++] = value;
        else if (strcmp(arg, "--read") == 0 && opt.n_read < MAX_OPS) {
            opt.read[opt.n_read++] = value;
            opt.listed_reads = 1;
        } else if (strcmp(arg, "--read-fd") == 0 && opt.n_read_fds < MAX_FDS) {
            opt.read_fds[opt.n_read_fds++] = parse_int(value, "descriptor");
            opt.listed_reads = 1;
        } else if (strcmp(arg, "--proxy-port") == 0) opt.proxy_port = parse_int(value, "port");
        else if (strcmp(arg, "--ctl-fd") == 0) opt.ctl_fd = parse_int(value, "descriptor");
        else if (strcmp(arg, "--keep-fd") == 0 && opt.n_keep_fds < MAX_FDS) opt.keep_fds[opt.n_keep_fds++] = parse_int(value, "descriptor");
        else if (strcmp(arg, "--cwd") == 0) opt.cwd = value;
        else if (strcmp(arg, "--max-processes") == 0) opt.max_processes = parse_int(value, "process limit");
        else if (strcmp(arg, "--net") == 0) {
            if (strcmp(value, "none") == 0) opt.net = NET_NONE;
            else if (strcmp(value, "proxy") == 0) opt.net = NET_PROXY;
            else if (strcmp(value, "full") == 0) opt.net = NET_FULL;
            else fail(0, "bad --net %s", value);
        } else fail(0, "unknown option %s", arg);
    }
    if (i >= argc) fail(0, "no command given");
    opt.argv = argv + i;
    if (opt.ctl_fd >= 0 && fcntl(opt.ctl_fd, F_SETFD, FD_CLOEXEC) < 0) {
        opt.ctl_fd = -1;
        fail(errno, "bad --ctl-fd");
    }
    return run_sandbox();
}
