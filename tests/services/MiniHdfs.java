import java.io.File;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * A MiniDFSCluster for the tests (tests/services/hdfs.py): one name node and one data node on
 * 127.0.0.1 with their storage under args[0], permissions off. Prints
 * "MINIHDFS hdfs://127.0.0.1:PORT" once it serves, and shuts down when its standard input ends
 * (the test process closed it or died).
 */
public final class MiniHdfs {
    private MiniHdfs() {
    }

    public static void main(String[] args) throws Exception {
        Configuration conf = new HdfsConfiguration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(args[0]).getAbsolutePath());
        conf.setBoolean("dfs.permissions.enabled", false);
        conf.setInt("dfs.replication", 1);
        conf.setBoolean("dfs.webhdfs.enabled", false);   // its REST resources take seconds to scan
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(1).build();
        cluster.waitActive();
        System.out.println("MINIHDFS hdfs://127.0.0.1:" + cluster.getNameNodePort());
        System.out.flush();
        while (System.in.read() != -1) {
            // wait for the end of standard input
        }
        cluster.shutdown();
    }
}
