//! `/proc/self/mountinfo`: what is mounted where, and the FUSE connection of a mount.

use std::fs;
use std::path::Path;

/// Where the kernel shows processes and settings. Its files are made by the kernel (never a
/// FIFO or a device, so none of `storage::open`'s checks apply) and their size reads as 0, so
/// they are read to their end: with `/proc/self/mountinfo`, the only files outside a data dir
/// read here.
const PROC_FS: &str = "/proc";

/// The content of `/proc/<rel>` (`self/limits`, `<pid>/cmdline`), `None` if it cannot be read
/// (the process ended, or belongs to another user).
pub(super) fn read_proc(rel: &str) -> Option<Vec<u8>> {
    fs::read(Path::new(PROC_FS).join(rel)).ok()
}

/// The entries of the directory `/proc/<rel>` (`""` for `/proc` itself, `<pid>/fd`).
pub(super) fn list_proc(rel: &str) -> Option<fs::ReadDir> {
    fs::read_dir(Path::new(PROC_FS).join(rel)).ok()
}

/// The `/proc/self/mountinfo` line of the mount whose mount point is `mountpoint`, if any
/// (the last one: a later mount on the same point hides earlier ones).
pub fn mount_entry(mountpoint: &Path) -> Option<String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let wanted = mountpoint.to_str()?;
    mountinfo
        .lines()
        .rev()
        .find(|line| line.split(' ').nth(4).map(unescape_mountinfo).as_deref() == Some(wanted))
        .map(str::to_string)
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let octal = bytes.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b, octal) {
            (b'\\', Some(digits)) => {
                let value = digits.iter().fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The FUSE connection number of the mount at `mountpoint` (the minor device number, which
/// names its directory under `/sys/fs/fuse/connections`).
pub(super) fn fuse_connection(mountpoint: &Path) -> Option<u32> {
    let line = mount_entry(mountpoint)?;
    let device = line.split(' ').nth(2)?;
    device.split_once(':')?.1.parse().ok()
}

/// The uid a FUSE mount's mountinfo line says mounted it (its `user_id=` super option), if
/// it says.
pub(super) fn fuse_owner(line: &str) -> Option<u32> {
    // After ` - `: the file system type, the source, the super options.
    let options = line.split(" - ").nth(1)?.split(' ').nth(2)?;
    options.split(',').find_map(|o| o.strip_prefix("user_id=")?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fuse_mounts_owner_is_its_user_id_option() {
        let line = "36 25 0:45 / /tmp/m rw,nosuid,nodev,relatime shared:1 - fuse.topicfs /d \
                    rw,user_id=1000,group_id=1000,default_permissions";
        assert_eq!(fuse_owner(line), Some(1000));
        assert_eq!(fuse_owner("36 25 0:45 / /tmp/m rw - ext4 /dev/sda1 rw"), None);
    }

    #[test]
    fn mountinfo_fields_are_unescaped() {
        assert_eq!(unescape_mountinfo(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape_mountinfo(r"/x\\y"), r"/x\\y");
        assert_eq!(unescape_mountinfo(r"/x\"), r"/x\");
    }
}
