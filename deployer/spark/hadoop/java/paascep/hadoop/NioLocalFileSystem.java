package paascep.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's local file system (checksummed, as `file:` is by default), its permissions set through
 * java.nio rather than a `chmod` process.
 *
 * <p>Without Hadoop's native library (PySpark's jars have none) RawLocalFileSystem sets the
 * permission of every file and directory it creates by forking `chmod`: ~4.5 ms each, 84 in a
 * bounded run of examples/daily_bill.cpl, 4 to 12 in every micro-batch (its offset and commit
 * files, its state stores' changelogs, and their checksums). This sets the same bits in the JVM.
 * With the native library, or a sticky bit (which java.nio cannot set), Hadoop's own way is kept.
 * Configured by deployer/spark/hadoop/__init__.py (`fs.file.impl`, local masters only).
 */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (unchecksummed) local file system under it. */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (NativeIO.isAvailable() || permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission));
    }
  }

  /** `permission`'s user, group and other bits as java.nio names them. */
  static Set<PosixFilePermission> posix(FsPermission permission) {
    Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
    add(bits, permission.getUserAction(), PosixFilePermission.OWNER_READ,
        PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);
    add(bits, permission.getGroupAction(), PosixFilePermission.GROUP_READ,
        PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE);
    add(bits, permission.getOtherAction(), PosixFilePermission.OTHERS_READ,
        PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);
    return bits;
  }

  private static void add(Set<PosixFilePermission> bits, FsAction action,
      PosixFilePermission read, PosixFilePermission write, PosixFilePermission execute) {
    if (action.implies(FsAction.READ)) {
      bits.add(read);
    }
    if (action.implies(FsAction.WRITE)) {
      bits.add(write);
    }
    if (action.implies(FsAction.EXECUTE)) {
      bits.add(execute);
    }
  }
}
