//! Where a pack file may be loaded from: not from a directory, or a file,
//! that someone else can change.

use std::path::Path;

/// Checks `file` (found in `dir`) before anything reads it. On unix:
///
/// * the directory and the file must not be group- or world-writable;
/// * both must be owned by this user (or root);
/// * a file that is a symlink must resolve inside the directory.
///
/// `Err` is one line naming the path and the fix.
pub fn check_location(dir: &Path, file: &Path) -> Result<(), String> {
    let canonical_dir = dir.canonicalize().map_err(|e| {
        format!(
            "cannot resolve the plugins directory {}: {e}",
            dir.display()
        )
    })?;
    if file
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        let target = file
            .canonicalize()
            .map_err(|e| format!("{} is a symlink that does not resolve: {e}", file.display()))?;
        if !target.starts_with(&canonical_dir) {
            return Err(format!(
                "{} is a symlink leading out of the plugins directory (to {}); copy the pack into {} instead",
                file.display(),
                target.display(),
                dir.display()
            ));
        }
    }
    owned_and_private(&canonical_dir, "plugins directory")?;
    owned_and_private(file, "pack file")
}

#[cfg(unix)]
fn owned_and_private(path: &Path, what: &str) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot inspect {}: {e}", path.display()))?;
    let mode = meta.mode();
    if mode & 0o002 != 0 {
        return Err(format!(
            "refusing the {what} {}: it is world-writable (run `chmod o-w {}`, or pass --allow-insecure-plugins-dir)",
            path.display(),
            path.display()
        ));
    }
    if mode & 0o020 != 0 {
        return Err(format!(
            "refusing the {what} {}: it is group-writable (run `chmod g-w {}`, or pass --allow-insecure-plugins-dir)",
            path.display(),
            path.display()
        ));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "refusing the {what} {}: it is owned by user {}, not by you (uid {me}) or root (chown it, or pass --allow-insecure-plugins-dir)",
            path.display(),
            meta.uid()
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn owned_and_private(_path: &Path, _what: &str) -> Result<(), String> {
    // Windows ACLs are not checked; the README says so.
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_private_directory_and_file_pass() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("libx.so");
        std::fs::write(&file, "x").unwrap();
        set_mode(&file, 0o644);
        check_location(dir.path(), &file).unwrap();
    }

    #[test]
    fn world_or_group_writable_locations_are_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("libx.so");
        std::fs::write(&file, "x").unwrap();
        set_mode(&file, 0o646);
        let error = check_location(dir.path(), &file).unwrap_err();
        assert!(
            error.contains("world-writable") && error.contains("chmod o-w"),
            "{error}"
        );
        set_mode(&file, 0o664);
        assert!(check_location(dir.path(), &file)
            .unwrap_err()
            .contains("group-writable"));
        set_mode(&file, 0o644);
        set_mode(dir.path(), 0o777);
        let error = check_location(dir.path(), &file).unwrap_err();
        assert!(
            error.contains("plugins directory") && error.contains("world-writable"),
            "{error}"
        );
        set_mode(dir.path(), 0o700);
    }

    #[test]
    fn a_file_owned_by_another_user_is_refused_but_root_is_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("libx.so");
        std::fs::write(&file, "x").unwrap();
        if rustix::process::geteuid().as_raw() != 0 {
            // Only root can hand a file to someone else; the check itself is
            // the same `uid` comparison exercised below when run as root.
            return;
        }
        std::os::unix::fs::chown(&file, Some(12345), None).unwrap();
        let error = check_location(dir.path(), &file).unwrap_err();
        assert!(error.contains("owned by user 12345"), "{error}");
        std::os::unix::fs::chown(&file, Some(0), None).unwrap();
        check_location(dir.path(), &file).unwrap();
    }

    #[test]
    fn a_symlink_out_of_the_directory_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("libevil.so");
        std::fs::write(&target, "x").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("libevil.so");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = check_location(dir.path(), &link).unwrap_err();
        assert!(
            error.contains("symlink leading out of the plugins directory"),
            "{error}"
        );
        let inside = dir.path().join("libreal.so");
        std::fs::write(&inside, "x").unwrap();
        let link = dir.path().join("libalias.so");
        std::os::unix::fs::symlink(&inside, &link).unwrap();
        check_location(dir.path(), &link).unwrap();
    }
}
