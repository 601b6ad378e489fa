// Container mount sources, walked without following links, checked for the job's account,
// and staged by descriptor for the runtime.
#include "agent/mount_check.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace gantry {

namespace {

// Whether `st`'s mode grants `want` (4 read, 2 write, 1 search/execute) to the account,
// by the owner, group or other bits as the kernel picks them (ACLs are not read).
bool Grants(const struct stat& st, const MountAccount& a, int want) {
  int bits = 0;
  if (st.st_uid == a.uid) {
    bits = (st.st_mode >> 6) & 7;
  } else if (st.st_gid == a.gid || std::find(a.groups.begin(), a.groups.end(), st.st_gid) != a.groups.end()) {
    bits = (st.st_mode >> 3) & 7;
  } else {
    bits = st.st_mode & 7;
  }
  return (bits & want) == want;
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

Expected<CheckedMount> CheckMountSource(const std::string& host, bool read_only, const MountAccount& account,
                                        const std::string& field) {
  if (host.empty() || host[0] != '/') return Status::Invalid(field, host + " is not an absolute path");
  Fd dir(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return Status::Internal("cannot open /");
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0) return Status::Internal("cannot stat /");
  std::string walked;
  size_t start = 1;
  while (start <= host.size()) {
    size_t slash = host.find('/', start);
    std::string name = host.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    start = slash == std::string::npos ? host.size() + 1 : slash + 1;
    if (name.empty()) continue;
    if (name == "." || name == "..") return Status::Invalid(field, host + " has '.' or '..' in it");
    // The directory holding it must let the account search it.
    if (!account.as_root && !Grants(st, account, 1)) {
      return Status::Invalid(field, fmt::format("{} is not reachable by the job's account (uid {}): {} does not let "
                                                "it in",
                                                host, account.uid, walked.empty() ? "/" : walked));
    }
    walked += "/" + name;
    // O_PATH | O_NOFOLLOW opens a link itself rather than what it points to: the fstat
    // below sees it as a link, whatever was swapped in since.
    Fd next(::openat(dir.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      return Status::Invalid(field, fmt::format("{} cannot be mounted: {}: {}", host, walked, std::strerror(errno)));
    }
    if (::fstat(next.get(), &st) != 0) return Status::Internal("cannot stat " + walked);
    if (S_ISLNK(st.st_mode)) {
      return Status::Invalid(field, fmt::format("{} cannot be mounted: {} is a symbolic link (mounts follow no links; "
                                                "give the path it points to)",
                                                host, walked));
    }
    if (start <= host.size() && !S_ISDIR(st.st_mode)) {
      return Status::Invalid(field, fmt::format("{} cannot be mounted: {} is not a directory", host, walked));
    }
    dir = std::move(next);
  }
  if (!account.as_root) {
    int want = 4 | (S_ISDIR(st.st_mode) ? 1 : 0) | (read_only ? 0 : 2);
    if (!Grants(st, account, want)) {
      return Status::Invalid(field, fmt::format("{} is not {} by the job's account (uid {})", host,
                                                read_only ? "readable" : "readable and writable", account.uid));
    }
  }
  // The path is the descriptor's own (a path that moved meanwhile is refused); what the
  // runtime mounts is the descriptor itself, staged (StageMount).
  std::string proc = fmt::format("/proc/self/fd/{}", dir.get());
  char real[4096];
  ssize_t n = ::readlink(proc.c_str(), real, sizeof(real) - 1);
  if (n <= 0) return Status::Internal("cannot read " + proc);
  std::string resolved(real, static_cast<size_t>(n));
  if (resolved != (walked.empty() ? "/" : walked)) {
    return Status::Invalid(field, fmt::format("{} moved while it was checked (now {})", host, resolved));
  }
  return CheckedMount(resolved, dir.release());
}

CheckedMount::~CheckedMount() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<std::string> StageMount(const CheckedMount& checked, const std::string& dir, const std::string& name,
                                 const std::string& field) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Internal(fmt::format("cannot make {}: {}", dir, std::strerror(errno)));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022)) {
    return Status::Internal(dir + " is not a directory only the agent may write");
  }
  if (::fstat(checked.fd(), &st) != 0) return Status::Internal("cannot stat " + checked.path());
  std::string target = dir + "/" + name;
  bool made = S_ISDIR(st.st_mode)
                  ? ::mkdir(target.c_str(), 0700) == 0
                  : Fd(::open(target.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600)).get() >= 0;
  if (!made) return Status::Internal(fmt::format("cannot make {}: {}", target, std::strerror(errno)));
  // The kernel follows /proc/self/fd/N to the descriptor's own file, not to a path.
  std::string source = fmt::format("/proc/self/fd/{}", checked.fd());
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    int e = errno;
    ::remove(target.c_str());
    return Status::Precondition(field, fmt::format("{} cannot be mounted: the agent cannot bind it at {} ({}; the "
                                                   "agent needs CAP_SYS_ADMIN for jobs of other accounts)",
                                                   checked.path(), target, std::strerror(e)));
  }
  return target;
}

void ReleaseStagedMounts(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  for (const std::string& n : names) {
    std::string target = dir + "/" + n;
    ::umount2(target.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    ::remove(target.c_str());  // an empty directory or file once unmounted; else it stays
  }
  ::rmdir(dir.c_str());
}

}  // namespace gantry
